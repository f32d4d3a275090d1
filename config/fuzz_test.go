package config

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// maxFuzzInput bounds what one fuzz input may be, so that a slow input
// (an alias-heavy YAML document, a long unknown key compared with every
// known one) costs milliseconds, not minutes; the loader's own bounds are
// what the targets test, not the size of the machine.
const maxFuzzInput = 32 << 10

// plantedSecret is a secret no input is made of: it is put under a secret
// key of each loaded input, and no message or log line may show it, nor
// its start (secretMark: a library may quote a value's first characters).
const (
	plantedSecret = secretMark + "ED-7f3a9c1e5b2d"
	secretMark    = "PLANT"
)

// secretPaths are the keys whose values are secrets, aliases included.
func secretPaths() []string {
	var paths []string
	for _, k := range Keys() {
		if k.Secret {
			paths = append(paths, append([]string{k.Path}, k.Aliases...)...)
		}
	}
	return paths
}

// plantedValue is the value set for path that holds plantedSecret where
// the key keeps its secret: the password of a DSN, the token of a console
// operator.
func plantedValue(path string) string {
	switch path {
	case "mysql.dsn":
		return "app:" + plantedSecret + "@tcp(db:3306)/shop"
	case "api.consoleTokens":
		return "ops:" + plantedSecret
	}
	return plantedSecret
}

// docSnippets are the fenced blocks of the given languages in the docs,
// which operators copy into their files.
func docSnippets(f *testing.F, langs ...string) []string {
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		f.Fatal(err)
	}
	fence := regexp.MustCompile("(?s)```(?:" + strings.Join(langs, "|") + ")\n(.*?)```")
	var out []string
	for _, name := range append(files, "../README.md") {
		raw, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for _, m := range fence.FindAllStringSubmatch(string(raw), -1) {
			out = append(out, m[1])
		}
	}
	if len(out) == 0 {
		f.Fatalf("no %v snippets in the docs", langs)
	}
	return out
}

// problemStart is what a problem of a load may start with: the file's
// name, a section or key (validation, the environment), or an
// environment name (two names of one setting).
func problemStart(name string) *regexp.Regexp {
	var alts []string
	if name != "" {
		alts = append(alts, regexp.QuoteMeta(name)+":")
	}
	seen := map[string]bool{}
	for _, k := range Keys() {
		root, _, _ := strings.Cut(k.Path, ".")
		if !seen[root] {
			seen[root] = true
			alts = append(alts, regexp.QuoteMeta(root)+"[.:]")
		}
		for _, env := range k.EnvNames() {
			alts = append(alts, regexp.QuoteMeta(env)+" ")
		}
	}
	return regexp.MustCompile("^(?:" + strings.Join(alts, "|") + ")")
}

// problemStarts caches problemStart by file name (fuzz workers call the
// fuzz function from one goroutine).
var problemStarts = map[string]*regexp.Regexp{}

// checkLoad loads data as the file name with env and checks what every
// load must hold: a config or an error, never both or neither; a config
// its own validation accepts; an error of one problem per line, each
// naming the file or the key it is about, as many as it counts; and
// plantedSecret, not even its start, in no message or log line, unless
// input (what the fuzzer wrote) holds secretMark itself.
func checkLoad(t *testing.T, name string, data []byte, env map[string]string, input string) {
	t.Helper()
	c, err := LoadFileWith(name, data, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if (c == nil) == (err == nil) {
		t.Fatalf("config %v and error %v", c, err)
	}
	canLeak := strings.Contains(input, secretMark)
	if err == nil {
		if p := c.validate(); len(p) > 0 {
			t.Fatalf("loaded a config its validation refuses: %v", p)
		}
		var sb strings.Builder
		slog.New(slog.NewTextHandler(&sb, nil)).Info("start", "config", c)
		if !canLeak && strings.Contains(sb.String(), secretMark) {
			t.Fatalf("the log line of the config shows a secret: %s", sb.String())
		}
		return
	}
	msg := err.Error()
	if !canLeak && strings.Contains(msg, secretMark) {
		t.Fatalf("the error shows a secret: %s", msg)
	}
	head, body, _ := strings.Cut(msg, "\n")
	n, convErr := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(head, "config: "), " problem(s):"))
	lines := strings.Split(body, "\n")
	if n > maxListedProblems && len(lines) == maxListedProblems+1 &&
		lines[maxListedProblems] == fmt.Sprintf("... and %d more problem(s)", n-maxListedProblems) {
		lines = lines[:maxListedProblems]
	} else if convErr != nil || n != len(lines) {
		t.Fatalf("%q does not count its %d lines:\n%s", head, len(lines), msg)
	}
	start, ok := problemStarts[name]
	if !ok {
		start = problemStart(name)
		problemStarts[name] = start
	}
	for _, l := range lines {
		if !start.MatchString(l) {
			t.Fatalf("problem %q names neither the file nor a key:\n%s", l, msg)
		}
	}
}

// fuzzFile is the body of the file targets: data as it is, then data
// under a line setting a secret key (which picks) to plantedSecret; its
// top bits mangle the key as editing does: lost, or misspelt.
func fuzzFile(t *testing.T, name string, data []byte, which uint8, line func(key, value string) string) {
	if len(data) > maxFuzzInput {
		return
	}
	checkLoad(t, name, data, nil, string(data))
	paths := secretPaths()
	key := paths[int(which)%len(paths)]
	value := plantedValue(key)
	switch which >> 6 {
	case 1:
		key = ""
	case 2:
		key += "x"
	}
	planted := append([]byte(line(key, value)), data...)
	checkLoad(t, name, planted, nil, string(data))
}

// FuzzLoadYAML: no YAML file makes the loader panic (or hang: the fuzz
// run's timeout), accept what it validates as bad, or show a secret; its
// refusals name the file and line. Seeds: the example file, the docs'
// YAML and hostile shapes. yaml.v3 keeps an alias as a pointer to its
// anchor and the loader follows one only into a section, never into a
// list item, so a billion-laughs document costs what its text does.
func FuzzLoadYAML(f *testing.F) {
	example, err := os.ReadFile("executor.example.yml")
	if err != nil {
		f.Fatal(err)
	}
	seeds := append(docSnippets(f, "yaml", "yml"), string(example),
		"a: &a {b: *a}\nxxl: &x {job: *x}\n",
		"a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\nredis: {lockNodes: *c}\n",
		"mysql: &m {dsn: 'u:p@tcp(h:3306)/d'}\nxxl.job.executor: *m\norder: {schema: *m, sources: [*m]}\n",
		"xxl:\n  job:\n    executor:\n      port: 99999999999999999999999\n      logReadLimit: -9223372036854775808\n",
		"xxl.job.admin.timeout: 18446744074\nmysql.connMaxLifetime: 9223372036\n",
		"api:\n  token: \"\\0\\x00\\u0000\\U0001F600\"\n  tokenHeader: \"\\u2028\"\n",
		"redis: {db: 1}\nredis.db: 2\nRedis:\n  DB: 3\n",
		"? [a, b]\n: c\n<<: {mysql: {dsn: x}}\n~: 1\n'': 2\n\"a\\nb\": 3\n\"log\\e[2J\": x\n",
		"x: &k log\n*k : {level: debug}\n",
		"order:\n  sources:\n    - {name: \"a\\nb\", dsn: 'u:p@tcp(h)/d', tables: [t_{0..99999999}]}\n",
		"%YAML 1.1\n---\nlog: {level: debug}\n...\n---\nlog: {level: info}\n",
		"\ufeffserver:\n  port: 8081\nspring: {a: {b: {c: [1, 2]}}}\nlogging.config: x\n",
		strings.Repeat("[", 200)+strings.Repeat("]", 200)+"\n",
		strings.Repeat("{a: ", 100)+"1"+strings.Repeat("}", 100)+"\n",
		"xxl.job.accessToken: !!binary aGVsbG8=\nlog.level: !custom info\nlog.format: !!int 3\n",
		"delay:\n  services: |\n    a=http://x\n    b=http://y\n  timerShards: 0x10\n  batchSize: 1_000\n",
	)
	for i, s := range seeds {
		f.Add([]byte(s), uint8(i))
	}
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		fuzzFile(t, "fuzz.yml", data, which, func(key, value string) string {
			return key + ": '" + value + "'\n"
		})
	})
}

// FuzzLoadProperties: the same for .properties files. Seeds: the Java
// executor's files (the docs hold none) and hostile shapes.
func FuzzLoadProperties(f *testing.F) {
	seeds := []string{
		"server.port=8081\nxxl.job.admin.addresses=http://admin:8080\nxxl.job.admin.timeout=3\nxxl.job.executor.enabled=false\n" +
			"xxl.job.executor.appname=shop-orders\nxxl.job.executor.accessToken=token-main-0123456789abc\nxxl.job.executor.ip=\n" +
			"xxl.job.executor.port=9999\nxxl.job.executor.logpath=/data/applogs/xxl-job/jobhandler\nxxl.job.executor.glueenabled=true\n",
		"  # comment\n! also\nxxl.job.admin.addresses = http://a:8080/,\\\n    http://b:8080/\nxxl.job.executor.appname:shop\\u002Dorders\n" +
			"xxl.job.executor.port 9100\nxxl.job.executor.logpath=/logs/a\nxxl.job.executor.logpath=/logs/b\r\ndelay.services=orders\\=http://o:8080/\n",
		"# ends in a backslash \\\nxxl.job.executor.appname = \\u8ba2\\u5355-\\\n    #orders\\\\\nxxl\\.job.executor.address=http\\://h\\:9999/\n" +
			"xxl.job.executor.excludedpackage=${not.expanded}\nxxl.job.admin.addresses=http://a:8080/,\\\n\thttp://b:8080/\\",
		"xxl.job.executor.logpath=\\u12G4\n", "a=\\u\n", "a=\\u00\n", "\\\n", "=\n:\n \\\n\\\\\n", "a\\\r\nb=c\r\n",
		"xxl.job.admin.accessToken=a\nxxl.job.executor.accessToken=b\n",
		"redis.db=99999999999999999999\nxxl.job.admin.timeout=18446744074\n",
		"order.sources=[{name: a, dsn: 'u:p@tcp(h:3306)/d', tables: order_info}]\n",
		"key\x00=\x00value\nmysql.dsn=\xff\xfe\n\ufeffredis.password=x\n",
		"x=${x}\ny=${y${y}}\n", strings.Repeat("a\\\n", 300) + "=1\n",
	}
	for i, s := range seeds {
		f.Add([]byte(s), uint8(i))
	}
	f.Fuzz(func(t *testing.T, data []byte, which uint8) {
		fuzzFile(t, "fuzz.properties", data, which, func(key, value string) string {
			return key + "=" + value + "\n"
		})
	})
}

// envNames is every environment name the loader reads.
func envNames() []string {
	var names []string
	for _, k := range Keys() {
		names = append(names, k.EnvNames()...)
	}
	return names
}

// plantedEnv sets every secret key's first environment name to hold
// plantedSecret.
func plantedEnv() map[string]string {
	env := map[string]string{}
	for _, k := range Keys() {
		if k.Secret {
			env[k.Env] = plantedValue(k.Path)
		}
	}
	return env
}

// FuzzLoadEnvironment: no value of an environment variable (which picks
// it) makes the loader panic, pass what validation refuses, or show a
// secret set in another variable.
func FuzzLoadEnvironment(f *testing.F) {
	names := envNames()
	for i, v := range []string{"", " ", "0", "-1", "99999999999999999999", "18446744074", "9223372036854775807", "1e9",
		"30s", "-5m", "2562048h", "true", "TRUE", "yes", "a,,b, ,c", ",", "http://u:p@h:1/", "http://[::1", "\x00", "\ufeff",
		"*", "[", "alice:0123456789abcdef,bob:", "orders=http://o:8080/", "u:p@tcp(h:3306)/d?loc=Local&parseTime=false"} {
		f.Add(uint16(i*7), v)
	}
	for i := range names {
		f.Add(uint16(i), "x")
	}
	f.Fuzz(func(t *testing.T, which uint16, value string) {
		if len(value) > maxFuzzInput {
			return
		}
		env := plantedEnv()
		env[names[int(which)%len(names)]] = value
		checkLoad(t, "", nil, env, value)
	})
}

// FuzzOrderSources: ORDER_SOURCES is parsed as YAML of its own; no list
// makes the loader panic, pass what validation refuses, or show a DSN's
// password in a message or log line.
func FuzzOrderSources(f *testing.F) {
	for _, s := range []string{
		"[{name: a, dsn: 'u:p@tcp(h:3306)/d', tables: order_info}]",
		"[{name: db0, dsn: 'app:pw-0@tcp(db0:3306)/shop_0', tables: 't_order_{0..7}', maxOpenConns: 4, connMaxLifetime: 2m}, " +
			"{name: db1, dsn: 'app:pw-1@tcp(db1:3306)/shop_1', tables: [t_order_8, t_order_9], connMaxIdleTime: 30}]",
		"", "[]", "~", "{}", "[[]]", "[{}]", "[1, 2]", "- {name: a}\n- {name: a}\n", "[{name: 'a\nb', dsn: x}]",
		"[&a {name: a, dsn: 'u:p@tcp(h)/d', tables: t}, *a]", "[{name: a, name: b, NAME: c, x-y: 1}]",
		"[{name: a, dsn: 'u:p@tcp(h)/d', tables: 't_{0..99999999999}'}]", "[{name: a, dsn: 'u:p@tcp(h)/d', tables: 't_{9..0}'}]",
		"[{name: a, dsn: 'u:p@tcp(h)/d', tables: t, maxOpenConns: 99999999999999999999, connMaxLifetime: 18446744074}]",
		"[{tables: [[a]], dsn: [b], name: {c: d}}]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > maxFuzzInput {
			return
		}
		env := plantedEnv()
		env["ORDER_SOURCES"] = text
		checkLoad(t, "", nil, env, text)
		// A password written once in the list is shown nowhere.
		var s OrderSources
		if s.setText(text) != nil {
			return
		}
		out := s.String()
		for _, src := range s {
			if cfg, err := mysql.ParseDSN(src.DSN); err == nil && len(cfg.Passwd) >= 6 &&
				strings.Count(text, cfg.Passwd) == 1 && strings.Contains(out, cfg.Passwd) {
				t.Fatalf("the sources' log form %s shows the password %q", out, cfg.Passwd)
			}
		}
	})
}
