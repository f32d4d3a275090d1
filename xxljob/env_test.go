package xxljob_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/xxljob"
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
		"XXL_JOB_EXECUTOR_OPENWITHOUTTOKEN":    "false",
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
