package xxljob_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/xxljob"
	"github.com/orderjob/executor/xxljob/xxljobtest"
)

func lookupFrom(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"XXL_JOB_ADMIN_ADDRESSES":              "http://a:8080/xxl-job-admin, http://b:8080/xxl-job-admin",
		"XXL_JOB_ADMIN_ACCESSTOKEN":            "t0k",
		"XXL_JOB_ADMIN_VERSION":                "3.4",
		"XXL_JOB_ADMIN_TIMEOUT":                "5",
		"XXL_JOB_ADMIN_TLS_CAFILE":             "/etc/ca.pem",
		"XXL_JOB_ADMIN_TLS_INSECURESKIPVERIFY": "false",
		"XXL_JOB_EXECUTOR_APPNAME":             "billing-executor",
		"XXL_JOB_EXECUTOR_ADDRESS":             "http://billing:9999/",
		"XXL_JOB_EXECUTOR_IP":                  "10.0.0.7",
		"XXL_JOB_EXECUTOR_IPEXCLUDE":           "docker0,cni*",
		"XXL_JOB_EXECUTOR_PORT":                "9998",
		"XXL_JOB_EXECUTOR_BINDADDR":            "0.0.0.0:9998",
		"XXL_JOB_EXECUTOR_LOGPATH":             "/data/applogs/xxl-job/jobhandler",
		"XXL_JOB_EXECUTOR_LOGRETENTIONDAYS":    "30",
		"XXL_JOB_EXECUTOR_SHUTDOWNTIMEOUT":     "1m",
		"XXL_JOB_EXECUTOR_LOGREADLIMIT":        "1048576",
		"XXL_JOB_EXECUTOR_CALLBACKQUEUESIZE":   "50",
	}
	c, err := xxljob.ConfigFromLookup(lookupFrom(env))
	require.NoError(t, err)
	require.Equal(t, xxljob.Config{
		AdminAddresses: []string{"http://a:8080/xxl-job-admin", "http://b:8080/xxl-job-admin"}, AccessToken: "t0k",
		AdminVersion: xxljob.Admin34, HTTPClientTimeout: 5 * time.Second, AdminCAFile: "/etc/ca.pem",
		AppName: "billing-executor", Address: "http://billing:9999/", IP: "10.0.0.7", IPExclude: []string{"docker0", "cni*"},
		Port: 9998, ListenAddr: "0.0.0.0:9998", LogPath: "/data/applogs/xxl-job/jobhandler", LogRetentionDays: 30,
		ShutdownTimeout: time.Minute, LogReadLimit: 1 << 20, CallbackQueueSize: 50,
	}, c)
	seen := map[string]bool{}
	for _, v := range xxljob.EnvVars() {
		seen[v.Name] = true
	}
	for name := range env {
		require.True(t, seen[name], "%s listed by EnvVars", name)
	}

	// The token's names are one setting.
	for _, name := range xxljob.TokenEnvVars {
		c, err := xxljob.ConfigFromLookup(lookupFrom(map[string]string{name: "x", "XXL_JOB_ACCESS_TOKEN": "x"}))
		require.NoError(t, err)
		require.Equal(t, "x", c.AccessToken)
	}
	_, err = xxljob.ConfigFromLookup(lookupFrom(map[string]string{"XXL_JOB_ACCESS_TOKEN": "a", "XXL_JOB_EXECUTOR_ACCESSTOKEN": "b"}))
	require.ErrorContains(t, err, "XXL_JOB_ACCESS_TOKEN and XXL_JOB_EXECUTOR_ACCESSTOKEN are both set, to different values")

	_, err = xxljob.ConfigFromLookup(lookupFrom(map[string]string{"XXL_JOB_EXECUTOR_PORT": "x", "XXL_JOB_ADMIN_VERSION": "4.0",
		"XXL_JOB_ADMIN_TIMEOUT": "soon"}))
	require.ErrorContains(t, err, "XXL_JOB_EXECUTOR_PORT")
	require.ErrorContains(t, err, "XXL_JOB_ADMIN_VERSION")
	require.ErrorContains(t, err, "XXL_JOB_ADMIN_TIMEOUT")
}

// The Java executor's switches: enabled (3.3.1+) turns the executor off,
// glueenabled (after 3.4) is accepted although GLUE never runs here, and
// excludedpackage (3.3+) is accepted and ignored, as nothing is scanned.
func TestConfigFromEnvJavaSwitches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want xxljob.Config
		err  string
	}{
		{env: map[string]string{"XXL_JOB_EXECUTOR_ENABLED": "false"}, want: xxljob.Config{Disabled: true}},
		{env: map[string]string{"XXL_JOB_EXECUTOR_ENABLED": " true "}, want: xxljob.Config{}},
		{env: map[string]string{"XXL_JOB_EXECUTOR_ENABLED": "no"}, err: `XXL_JOB_EXECUTOR_ENABLED: strconv.ParseBool: parsing "no": invalid syntax`},
		{env: map[string]string{"XXL_JOB_EXECUTOR_GLUEENABLED": "true"}, want: xxljob.Config{GlueEnabled: true}},
		{env: map[string]string{"XXL_JOB_EXECUTOR_GLUEENABLED": "false"}, want: xxljob.Config{}},
		{env: map[string]string{"XXL_JOB_EXECUTOR_GLUEENABLED": "yes"}, err: "XXL_JOB_EXECUTOR_GLUEENABLED"},
		{env: map[string]string{"XXL_JOB_EXECUTOR_EXCLUDEDPACKAGE": "org.springframework,spring"}, want: xxljob.Config{}},
	} {
		c, err := xxljob.ConfigFromLookup(lookupFrom(tc.env))
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.env)
			continue
		}
		require.NoError(t, err, tc.env)
		require.Equal(t, tc.want, c, tc.env)
	}
	listed := map[string]string{}
	for _, v := range xxljob.EnvVars() {
		listed[v.Name] = v.Property
	}
	require.Equal(t, "xxl.job.executor.enabled", listed["XXL_JOB_EXECUTOR_ENABLED"])
	require.Equal(t, "xxl.job.executor.glueenabled", listed["XXL_JOB_EXECUTOR_GLUEENABLED"])
	require.Equal(t, "xxl.job.executor.excludedpackage", listed["XXL_JOB_EXECUTOR_EXCLUDEDPACKAGE"])
}

// XXL_JOB_EXECUTOR_ENABLED=false: Start listens on nothing and tells the
// admin nothing, as the Java executor's start returns at once.
// XXL_JOB_EXECUTOR_GLUEENABLED=true: Start warns that GLUE never runs.
func TestConfigFromEnvDisabledAndGlue(t *testing.T) {
	t.Parallel()
	admin := xxljobtest.New(t, xxljobtest.Options{})
	for _, tc := range []struct {
		enabled, glue string
		listens       bool
		log           string
	}{
		{"false", "false", false, "xxl-job executor not enabled"},
		{"true", "true", true, "GLUE (script) jobs never run in this executor"},
	} {
		c, err := xxljob.ConfigFromLookup(lookupFrom(map[string]string{"XXL_JOB_EXECUTOR_ENABLED": tc.enabled,
			"XXL_JOB_EXECUTOR_GLUEENABLED": tc.glue, "XXL_JOB_ADMIN_ADDRESSES": admin.URL, "XXL_JOB_EXECUTOR_APPNAME": "env-executor",
			"XXL_JOB_EXECUTOR_BINDADDR": "127.0.0.1:0", "XXL_JOB_EXECUTOR_LOGPATH": t.TempDir()}))
		require.NoError(t, err)
		logs := &syncBuffer{}
		c.Logger = newTextLogger(logs)
		e, err := xxljob.New(c)
		require.NoError(t, err)
		require.NoError(t, e.Start(t.Context()))
		require.Equal(t, tc.listens, e.Addr() != nil, "listening")
		require.NoError(t, e.Shutdown(t.Context()))
		require.Contains(t, logs.String(), tc.log)
		// Shutdown deregisters a started executor; a disabled one never
		// called the admin.
		require.Equal(t, tc.listens, len(admin.Requests()) > 0, "calls to the admin: %v", admin.Requests())
	}
}
