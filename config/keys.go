package config

import (
	"reflect"
	"strings"
	"time"
)

// Key describes one configuration key.
type Key struct {
	Path    string   // dotted YAML path, e.g. xxl.job.executor.port
	Aliases []string // other dotted paths setting the same value (older or newer Java spellings)
	Env     string   // environment variable
	// EnvAliases are further environment names read for the key: the names
	// Spring Boot's relaxed binding gives the Java executor's keys
	// (xxl.job.admin.accessToken → XXL_JOB_ADMIN_ACCESSTOKEN) where they
	// differ from Env.
	EnvAliases []string
	Default    string // default as text ("" if none)
	Secret     bool   // never logged
	Doc        string // one-line description
}

// EnvNames is every environment name read for the key, Env first.
func (k Key) EnvNames() []string { return append([]string{k.Env}, k.EnvAliases...) }

// Keys lists every key in declaration order.
func Keys() []Key {
	var keys []Key
	walk(reflect.ValueOf(&Config{}).Elem(), "", func(f field) {
		keys = append(keys, Key{Path: f.path, Aliases: f.aliases, Env: f.env, EnvAliases: f.envAliases,
			Default: f.def, Secret: f.secret, Doc: f.doc})
	})
	return keys
}

type field struct {
	v                   reflect.Value
	path, env, def, doc string
	aliases, envAliases []string
	secret              bool
	tagged              bool   // def is the field's `default` tag, not a domain default
	redact              string // "url": URLs whose passwords and tokens LogValue masks; "named": name=URL pairs
}

// walk visits every leaf field below v; fields without a yaml tag are not
// configuration.
func walk(v reflect.Value, prefix string, fn func(field)) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name := sf.Tag.Get("yaml")
		if name == "" {
			continue
		}
		path := joinPath(prefix, name)
		fv := v.Field(i)
		if isSection(sf.Type) {
			walk(fv, path, fn)
			continue
		}
		f := field{v: fv, path: path, env: sf.Tag.Get("env"), def: sf.Tag.Get("default"),
			doc: sf.Tag.Get("doc"), secret: sf.Tag.Get("secret") == "true", redact: sf.Tag.Get("redact")}
		if _, f.tagged = sf.Tag.Lookup("default"); !f.tagged {
			f.def = domainDefaults[path] // declared once, by the package that owns the behaviour
		}
		if also := sf.Tag.Get("also"); also != "" {
			f.aliases = strings.Split(also, ",")
		}
		for _, p := range append([]string{f.path}, f.aliases...) {
			if s := springEnv(p); s != "" && s != f.env && !contains(f.envAliases, s) {
				f.envAliases = append(f.envAliases, s)
			}
		}
		fn(f)
	}
}

func isSection(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && t != reflect.TypeFor[time.Duration]()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func joinPath(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// normKey folds the spellings Spring's relaxed binding accepts
// (logRetentionDays, log-retention-days, log_retention_days) to one.
func normKey(s string) string {
	return strings.ToLower(relaxedSeparators.Replace(s))
}

// relaxedSeparators and springEnvSeparators are built once: a Replacer
// built per call cost milliseconds per unknown key (didYouMean folds every
// known key for each), and a file of a thousand unknown keys took seconds
// to refuse.
var (
	relaxedSeparators   = strings.NewReplacer("-", "", "_", "")
	springEnvSeparators = strings.NewReplacer(".", "_", "-", "")
)

// springEnv is the environment name Spring Boot binds to a key of the Java
// executor (xxl.job.*): upper case, dots to underscores, dashes dropped.
// Other keys are ours alone and keep only their documented name.
func springEnv(path string) string {
	if !strings.HasPrefix(path, "xxl.job.") {
		return ""
	}
	return strings.ToUpper(springEnvSeparators.Replace(path))
}
