package config_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
)

// A Java 3.x executor's application.yml, as its sample lays it out, loads
// unchanged.
const java3YAML = `
server:
  port: 8081
logging:
  config: classpath:logback.xml
xxl:
  job:
    admin:
      addresses: http://admin:8080/xxl-job-admin
      accessToken: token-3x-0123456789abc
      timeout: 3
    executor:
      enabled: true
      appname: shop-orders
      address:
      ip: 10.0.0.7
      port: 9998
      logpath: /data/applogs/xxl-job/jobhandler
      logretentiondays: 30
      excludedpackage: org.springframework,spring
`

func TestJava3ApplicationYAMLLoads(t *testing.T) {
	t.Parallel()
	c, err := config.LoadFileWith("application.yml", []byte(java3YAML), noEnv)
	require.NoError(t, err)
	x := c.XXL.Job
	require.Equal(t, "token-3x-0123456789abc", x.AccessToken)
	require.Equal(t, 3*time.Second, x.Admin.Timeout, "the Java timeout is in seconds")
	require.True(t, x.Executor.Enabled)
	require.Equal(t, "shop-orders", x.Executor.AppName)
	require.Equal(t, "10.0.0.7", x.Executor.IP)
	require.Equal(t, 9998, x.Executor.Port)
	require.Equal(t, "/data/applogs/xxl-job/jobhandler", x.Executor.LogPath)
	require.Equal(t, "org.springframework,spring", x.Executor.ExcludedPackage)

	msgs := notices(c)
	require.Contains(t, msgs, "excludedpackage is ignored")
	require.Contains(t, msgs, "Spring Boot keys ignored")
	require.Contains(t, msgs, "server.port, logging.config")
	require.NotContains(t, msgs, "glueenabled")
}

func TestJava24ApplicationYAMLLoads(t *testing.T) {
	t.Parallel()
	c, err := config.LoadFileWith("application.yml", []byte(`
xxl:
  job:
    admin:
      addresses: http://admin:8080/xxl-job-admin
    accessToken: token-24-0123456789abc
    executor:
      appname: shop-orders
      address: ""
      ip: ""
      port: 9999
      logpath: /data/applogs/xxl-job/jobhandler
      logretentiondays: 30
`), noEnv)
	require.NoError(t, err)
	require.Equal(t, "token-24-0123456789abc", c.XXL.Job.AccessToken)
	require.True(t, c.XXL.Job.Executor.Enabled, "enabled by default, as before 3.3.1")
	require.Empty(t, c.Notices())
}

// The branch after 3.4 moves the token under xxl.job.executor and adds
// glueenabled; its sample is a .properties file.
func TestJavaPropertiesAfter34Load(t *testing.T) {
	t.Parallel()
	c, err := config.LoadFileWith("conf/application.properties", []byte(`
# the executor's settings
server.port=8081
xxl.job.admin.addresses=http://admin:8080
xxl.job.admin.timeout=3
xxl.job.executor.enabled=false
xxl.job.executor.appname=shop-orders
xxl.job.executor.accessToken=token-main-0123456789abc
xxl.job.executor.ip=
xxl.job.executor.port=9999
xxl.job.executor.address=
xxl.job.executor.logpath=/data/applogs/xxl-job/jobhandler
xxl.job.executor.logretentiondays=30
xxl.job.executor.excludedpackage=
xxl.job.executor.glueenabled=true
`), noEnv)
	require.NoError(t, err)
	x := c.XXL.Job
	require.Equal(t, []string{"http://admin:8080"}, x.Admin.Addresses)
	require.Equal(t, "token-main-0123456789abc", x.AccessToken)
	require.False(t, x.Executor.Enabled)
	require.True(t, x.Executor.GlueEnabled)
	require.Equal(t, "./logs/xxl-job", config.Default().XXL.Job.Executor.LogPath)
	require.Equal(t, "/data/applogs/xxl-job/jobhandler", x.Executor.LogPath)
	require.Equal(t, "", x.Executor.IP, "an empty value keeps the default")

	var warned, off bool
	for _, n := range c.Notices() {
		if n.Level == slog.LevelWarn && strings.Contains(n.Msg, "glueenabled") {
			warned = true
		}
		if strings.Contains(n.Msg, "enabled is false") {
			off = true
		}
	}
	require.True(t, warned, "glueenabled: true warns that GLUE is refused")
	require.True(t, off, "enabled: false is noticed")
	require.NotContains(t, notices(c), "excludedpackage", "an empty excludedpackage says nothing")
}

func TestConflictingTokenKeysFailNamingBoth(t *testing.T) {
	t.Parallel()
	_, err := config.LoadFileWith("app.yml", []byte(`
xxl:
  job:
    accessToken: old-token
    admin:
      accessToken: new-token
`), noEnv)
	require.Error(t, err)
	require.Contains(t, err.Error(), "app.yml:4: xxl.job.accessToken (line 4) and xxl.job.admin.accessToken (line 6) are one setting")
	require.NotContains(t, err.Error(), "old-token", "token values are secrets")

	// Dotted keys and the third spelling, same rule.
	_, err = config.LoadFileWith("app.properties", []byte("xxl.job.admin.accessToken=a\nxxl.job.executor.accessToken=b\n"), noEnv)
	require.ErrorContains(t, err, "xxl.job.admin.accessToken (line 1) and xxl.job.executor.accessToken (line 2)")

	// The same value twice, or one of them empty, is not a conflict.
	c, err := config.LoadWith([]byte("xxl.job.accessToken: same-0123456789abc\nxxl.job.executor.accessToken: same-0123456789abc\n"), noEnv)
	require.NoError(t, err)
	require.Equal(t, "same-0123456789abc", c.XXL.Job.AccessToken)
	c, err = config.LoadWith([]byte("xxl.job.accessToken: ''\nxxl.job.admin.accessToken: only-0123456789abc\n"), noEnv)
	require.NoError(t, err)
	require.Equal(t, "only-0123456789abc", c.XXL.Job.AccessToken)
}

func TestTokenEnvironmentNames(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"XXL_JOB_ACCESS_TOKEN", "XXL_JOB_ACCESSTOKEN", "XXL_JOB_ADMIN_ACCESSTOKEN", "XXL_JOB_EXECUTOR_ACCESSTOKEN"} {
		c, err := config.LoadWith([]byte("xxl.job.admin.accessToken: from-file-0123456789abc\n"), envOf(map[string]string{name: "from-env-0123456789abc"}))
		require.NoError(t, err, name)
		require.Equal(t, "from-env-0123456789abc", c.XXL.Job.AccessToken, "%s wins over the file", name)
	}
	_, err := config.LoadWith(nil, envOf(map[string]string{"XXL_JOB_ACCESS_TOKEN": "a", "XXL_JOB_ADMIN_ACCESSTOKEN": "b"}))
	require.ErrorContains(t, err, "XXL_JOB_ACCESS_TOKEN and XXL_JOB_ADMIN_ACCESSTOKEN are one setting (xxl.job.accessToken)")
	c, err := config.LoadWith(nil, envOf(map[string]string{"XXL_JOB_ACCESS_TOKEN": "a-0123456789abcdef", "XXL_JOB_EXECUTOR_ACCESSTOKEN": "a-0123456789abcdef"}))
	require.NoError(t, err)
	require.Equal(t, "a-0123456789abcdef", c.XXL.Job.AccessToken)
}

// Every key of the Java executor is read under the environment name Spring
// Boot's relaxed binding gives it, so a Java deployment's variables work.
func TestSpringEnvironmentNames(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"XXL_JOB_ADMIN_ADDRESSES":           "http://spring:8080",
		"XXL_JOB_ADMIN_TIMEOUT":             "5",
		"XXL_JOB_EXECUTOR_ENABLED":          "false",
		"XXL_JOB_EXECUTOR_APPNAME":          "spring-app",
		"XXL_JOB_EXECUTOR_LOGRETENTIONDAYS": "9",
		"XXL_JOB_EXECUTOR_EXCLUDEDPACKAGE":  "com.x",
		"XXL_JOB_EXECUTOR_GLUEENABLED":      "true",
	}
	c, err := config.LoadWith(nil, envOf(want))
	require.NoError(t, err)
	x := c.XXL.Job
	require.Equal(t, []string{"http://spring:8080"}, x.Admin.Addresses)
	require.Equal(t, 5*time.Second, x.Admin.Timeout)
	require.False(t, x.Executor.Enabled)
	require.Equal(t, "spring-app", x.Executor.AppName)
	require.Equal(t, 9, x.Executor.LogRetentionDays)
	require.Equal(t, "com.x", x.Executor.ExcludedPackage)
	require.True(t, x.Executor.GlueEnabled)

	for _, k := range config.Keys() {
		if !strings.HasPrefix(k.Path, "xxl.job.") {
			require.Empty(t, k.EnvAliases, "%s is ours alone", k.Path)
			continue
		}
		for _, p := range append([]string{k.Path}, k.Aliases...) {
			spring := strings.ToUpper(strings.ReplaceAll(p, ".", "_"))
			require.Contains(t, k.EnvNames(), spring, "%s", p)
		}
	}
}

func TestYAMLErrorsNameFileAndLineOnce(t *testing.T) {
	t.Parallel()
	_, err := config.LoadFileWith("conf/executor.yml", []byte("xxl:\n  job:\n    admin: [\n"), noEnv)
	require.Error(t, err)
	msg := err.Error()
	require.NotContains(t, msg, "yaml: yaml:")
	require.Equal(t, 1, strings.Count(msg, "conf/executor.yml"), msg)
	require.Regexp(t, `conf/executor\.yml:\d+: `, msg)

	_, err = config.LoadFileWith("conf/executor.yml", []byte("xxl:\n  job:\n    executor:\n      port: many\n      colour: blue\n"), noEnv)
	require.ErrorContains(t, err, `conf/executor.yml:4: xxl.job.executor.port: "many" is not a whole number`)
	require.ErrorContains(t, err, "conf/executor.yml:5: unknown key xxl.job.executor.colour")
}

func TestPropertiesSyntax(t *testing.T) {
	t.Parallel()
	c, err := config.LoadFileWith("x.properties", []byte(
		"  # comment\n"+
			"! also a comment\n"+
			"xxl.job.admin.addresses = http://a:8080/xxl-job-admin,\\\n"+
			"    http://b:8080/xxl-job-admin\n"+
			"xxl.job.executor.appname:shop\\u002Dorders\n"+
			"xxl.job.executor.port 9100\n"+
			"xxl.job.executor.logpath=/logs/a\n"+
			"xxl.job.executor.logpath=/logs/b\r\n"+
			"delay.services=orders\\=http://o:8080/\n"), noEnv)
	require.NoError(t, err)
	x := c.XXL.Job
	require.Equal(t, []string{"http://a:8080/xxl-job-admin", "http://b:8080/xxl-job-admin"}, x.Admin.Addresses)
	require.Equal(t, "shop-orders", x.Executor.AppName)
	require.Equal(t, 9100, x.Executor.Port)
	require.Equal(t, "/logs/b", x.Executor.LogPath, "the last of a repeated key wins, as in Java")
	require.Equal(t, []string{"orders=http://o:8080/"}, c.Delay.Services)

	_, err = config.LoadFileWith("x.properties", []byte("a=1\nxxl.job.nope=2\n"), noEnv)
	require.ErrorContains(t, err, "x.properties:1: unknown key a")
	require.ErrorContains(t, err, "x.properties:2: unknown key xxl.job.nope")
}

func notices(c *config.Config) string {
	var b strings.Builder
	for _, n := range c.Notices() {
		b.WriteString(n.Msg + "\n")
	}
	return b.String()
}

// A bad URL is named in the error without its secrets.
func TestBadURLErrorsHideSecrets(t *testing.T) {
	t.Parallel()
	_, err := config.LoadWith(nil, envOf(map[string]string{
		"XXL_JOB_ADMIN_ADDRESSES": "ftp://u:adminpw-SECRET@admin/",
		"ORDER_PAYMENT_CLOSE_URL": "pay/close?token=SECRET2",
		"DELAY_SERVICES":          "orders=svc:p4ss-SECRET@host",
	}))
	require.Error(t, err)
	require.Contains(t, err.Error(), "ftp://u:xxxxx@admin/")
	require.NotContains(t, err.Error(), "SECRET")
}

// The library's reading of java.util.Properties, as the Java executor's
// files use it: escapes, \uXXXX and UTF-8 text, continuations (a comment
// ends in a backslash without continuing; a continued line may start with
// '#'), no ${...} expansion, and a malformed escape named by its line.
func TestPropertiesEscapesContinuationsUnicode(t *testing.T) {
	t.Parallel()
	c, err := config.LoadFileWith("x.properties", []byte(
		"# a comment ending in a backslash does not continue \\\n"+
			"xxl.job.executor.appname = \\u8ba2\\u5355-\\\n"+
			"    #orders\\\\\n"+
			"xxl.job.executor.logpath:/data/日志/a\\ b\\tc\n"+
			"xxl.job.executor.excludedpackage=${not.expanded}\n"+
			"xxl\\.job.executor.address=http\\://h\\:9999/\n"+
			"xxl.job.admin.addresses=http://a:8080/,\\\n"+
			"\thttp://b:8080/\\"), noEnv)
	require.NoError(t, err)
	x := c.XXL.Job
	require.Equal(t, "订单-#orders\\", x.Executor.AppName, "\\u escapes, a continued line starting with '#', an escaped backslash ending it")
	require.Equal(t, "/data/日志/a b\tc", x.Executor.LogPath)
	require.Equal(t, "${not.expanded}", x.Executor.ExcludedPackage)
	require.Equal(t, "http://h:9999/", x.Executor.Address)
	require.Equal(t, []string{"http://a:8080/", "http://b:8080/"}, x.Admin.Addresses, "a continuation at the end of the file")

	_, err = config.LoadFileWith("x.properties", []byte("xxl.job.executor.appname=a\n\nxxl.job.executor.logpath=\\u12G4\n"), noEnv)
	require.ErrorContains(t, err, "x.properties:3: invalid unicode literal")
}

// A key continued on the next line is joined as Java joins it, the
// continuing line's leading blanks dropped. Before, the library kept the
// continuation in the key as a newline, and the key was unknown.
func TestPropertiesKeyContinuedAsInJava(t *testing.T) {
	t.Parallel()
	c, err := config.LoadFileWith("x.properties", []byte("xxl.job.executor.app\\\n    name=shop-\\\n  orders\n"), noEnv)
	require.NoError(t, err)
	require.Equal(t, "shop-orders", c.XXL.Job.Executor.AppName)
}

// A line starting with its separator (a key lost in editing) is refused
// naming its line, never its value. Before, the message was the value's
// first ten characters, a token's for one, and the library's lexer
// goroutine stayed blocked for good (goleak in TestMain saw it).
func TestPropertiesValueWithoutKey(t *testing.T) {
	t.Parallel()
	for _, sep := range []string{"=", ":"} {
		_, err := config.LoadFileWith("x.properties", []byte("xxl.job.executor.appname=shop-orders\n  "+sep+"tok-SECRET-0123456789\n"), noEnv)
		require.EqualError(t, err, "config: 1 problem(s):\nx.properties:2: a value without a key: the line starts with '"+sep+"'")
	}
}
