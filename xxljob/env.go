package xxljob

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// EnvVar is one environment variable ConfigFromEnv reads. The names are
// those the order executor's own loader accepts, which are Spring's relaxed
// binding of the Java executor's properties (xxl.job.executor.logpath ->
// XXL_JOB_EXECUTOR_LOGPATH), so a container set up for a Java executor
// configures a Go one unchanged.
type EnvVar struct {
	Name     string // environment variable
	Property string // the Java executor's property (or ours, where Java has none)
	Doc      string // what it sets, with its unit
}

// TokenEnvVars are the names of the access token. Java spells the property
// xxl.job.accessToken (2.3-2.4), xxl.job.admin.accessToken (2.5-3.4) and
// xxl.job.executor.accessToken (after 3.4); they are one setting, and two of
// them set to different values is an error.
var TokenEnvVars = []string{"XXL_JOB_ACCESS_TOKEN", "XXL_JOB_ACCESSTOKEN", "XXL_JOB_ADMIN_ACCESSTOKEN", "XXL_JOB_EXECUTOR_ACCESSTOKEN"}

// envFields maps each variable to the Config field it sets.
var envFields = []struct {
	EnvVar
	set func(c *Config, v string) error
}{
	{EnvVar{"XXL_JOB_ADMIN_ADDRESSES", "xxl.job.admin.addresses", "admin base URLs with the context path, comma-separated"},
		func(c *Config, v string) error { c.AdminAddresses = splitList(v); return nil }},
	{EnvVar{"XXL_JOB_ADMIN_VERSION", "xxl.job.admin.version", "auto, 2.x, 3.3, 3.4 or main"},
		func(c *Config, v string) (err error) { c.AdminVersion, err = ParseAdminVersion(v); return err }},
	{EnvVar{"XXL_JOB_ADMIN_TIMEOUT", "xxl.job.admin.timeout", "timeout of each call to the admin: seconds, or a duration such as 3s"},
		func(c *Config, v string) (err error) { c.HTTPClientTimeout, err = parseSeconds(v); return err }},
	{EnvVar{"XXL_JOB_ADMIN_TLS_CAFILE", "xxl.job.admin.tls.caFile", "PEM file of CAs trusted for an https admin, besides the system's"},
		func(c *Config, v string) error { c.AdminCAFile = v; return nil }},
	{EnvVar{"XXL_JOB_ADMIN_TLS_INSECURESKIPVERIFY", "xxl.job.admin.tls.insecureSkipVerify", "true: accept any admin certificate (warned at every start)"},
		func(c *Config, v string) (err error) {
			c.AdminInsecureSkipVerify, err = strconv.ParseBool(v)
			return err
		}},
	{EnvVar{"XXL_JOB_EXECUTOR_ENABLED", "xxl.job.executor.enabled", "false: the executor does not start (Disabled); default true"},
		func(c *Config, v string) error {
			on, err := strconv.ParseBool(v)
			c.Disabled = err == nil && !on
			return err
		}},
	{EnvVar{"XXL_JOB_EXECUTOR_GLUEENABLED", "xxl.job.executor.glueenabled", "accepted; GLUE (script) jobs are always refused, true makes Start warn"},
		func(c *Config, v string) (err error) { c.GlueEnabled, err = strconv.ParseBool(v); return err }},
	{EnvVar{"XXL_JOB_EXECUTOR_EXCLUDEDPACKAGE", "xxl.job.executor.excludedpackage", "accepted and ignored: handlers are registered in code, nothing is scanned"},
		func(*Config, string) error { return nil }},
	{EnvVar{"XXL_JOB_EXECUTOR_APPNAME", "xxl.job.executor.appname", "the executor group's AppName"},
		func(c *Config, v string) error { c.AppName = v; return nil }},
	{EnvVar{"XXL_JOB_EXECUTOR_ADDRESS", "xxl.job.executor.address", "URL the admin calls; default http://{ip}:{port}/"},
		func(c *Config, v string) error { c.Address = v; return nil }},
	{EnvVar{"XXL_JOB_EXECUTOR_IP", "xxl.job.executor.ip", "IP of the default address"},
		func(c *Config, v string) error { c.IP = v; return nil }},
	{EnvVar{"XXL_JOB_EXECUTOR_IPEXCLUDE", "xxl.job.executor.ipExclude", "interfaces never advertised, comma-separated patterns; - for none"},
		func(c *Config, v string) error { c.IPExclude = splitList(v); return nil }},
	{EnvVar{"XXL_JOB_EXECUTOR_PORT", "xxl.job.executor.port", "port of the executor's server"},
		func(c *Config, v string) (err error) { c.Port, err = strconv.Atoi(v); return err }},
	{EnvVar{"XXL_JOB_EXECUTOR_BINDADDR", "xxl.job.executor.bindAddr", "listen address; default :{port}"},
		func(c *Config, v string) error { c.ListenAddr = v; return nil }},
	{EnvVar{"XXL_JOB_EXECUTOR_LOGPATH", "xxl.job.executor.logpath", "folder of run logs and the callback spool"},
		func(c *Config, v string) error { c.LogPath = v; return nil }},
	{EnvVar{"XXL_JOB_EXECUTOR_LOGRETENTIONDAYS", "xxl.job.executor.logretentiondays", "days run logs are kept; below 3 keeps them all"},
		func(c *Config, v string) (err error) { c.LogRetentionDays, err = strconv.Atoi(v); return err }},
	{EnvVar{"XXL_JOB_EXECUTOR_SHUTDOWNTIMEOUT", "xxl.job.executor.shutdownTimeout", "how long shutdown waits for running jobs: seconds or a duration"},
		func(c *Config, v string) (err error) { c.ShutdownTimeout, err = parseSeconds(v); return err }},
	{EnvVar{"XXL_JOB_EXECUTOR_LOGREADLIMIT", "xxl.job.executor.logReadLimit", "bytes of a run log one /log answer carries at most"},
		func(c *Config, v string) (err error) { c.LogReadLimit, err = strconv.ParseInt(v, 10, 64); return err }},
	{EnvVar{"XXL_JOB_EXECUTOR_CALLBACKQUEUESIZE", "xxl.job.executor.callbackQueueSize", "run results held in memory for delivery"},
		func(c *Config, v string) (err error) { c.CallbackQueueSize, err = strconv.Atoi(v); return err }},
}

// EnvVars lists the variables ConfigFromEnv reads, the token's names
// (TokenEnvVars) first.
func EnvVars() []EnvVar {
	out := make([]EnvVar, 0, len(TokenEnvVars)+len(envFields))
	for _, n := range TokenEnvVars {
		out = append(out, EnvVar{Name: n, Property: tokenProperty(n), Doc: "the access token (one setting under four names)"})
	}
	for _, f := range envFields {
		out = append(out, f.EnvVar)
	}
	return out
}

func tokenProperty(env string) string {
	switch env {
	case "XXL_JOB_ADMIN_ACCESSTOKEN":
		return "xxl.job.admin.accessToken"
	case "XXL_JOB_EXECUTOR_ACCESSTOKEN":
		return "xxl.job.executor.accessToken"
	}
	return "xxl.job.accessToken"
}

// ConfigFromEnv builds a Config from the environment (see EnvVars), for a
// program that configures its executor the way a Java one is configured.
// Unset variables leave their fields zero, that is, at their defaults; New
// checks the result. Every malformed variable is reported at once.
func ConfigFromEnv() (Config, error) { return ConfigFromLookup(os.LookupEnv) }

// ConfigFromLookup is ConfigFromEnv with the variables read through lookup.
func ConfigFromLookup(lookup func(string) (string, bool)) (Config, error) {
	var c Config
	var errs []error
	tokenFrom := ""
	for _, name := range TokenEnvVars {
		v, ok := lookup(name)
		if !ok {
			continue
		}
		if tokenFrom != "" && v != c.AccessToken {
			errs = append(errs, fmt.Errorf("%s and %s are both set, to different values: they are one setting", tokenFrom, name))
			continue
		}
		c.AccessToken, tokenFrom = v, name
	}
	for _, f := range envFields {
		v, ok := lookup(f.Name)
		if !ok {
			continue
		}
		if err := f.set(&c, strings.TrimSpace(v)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.Name, err))
		}
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("xxljob: environment: %w", errors.Join(errs...))
	}
	return c, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseSeconds reads whole seconds (the Java executor's unit) or a Go
// duration.
func parseSeconds(s string) (time.Duration, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not seconds or a duration (e.g. 30s)", s)
	}
	return d, nil
}
