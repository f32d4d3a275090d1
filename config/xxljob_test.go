package config_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/xxljob"
)

// TestXXLJobEnvironmentNamesAgree: every variable xxljob.ConfigFromEnv
// reads (for other teams' executors) is one this loader reads for the same
// key, so one container environment configures both alike.
func TestXXLJobEnvironmentNamesAgree(t *testing.T) {
	t.Parallel()
	byEnv := map[string]config.Key{}
	for _, k := range config.Keys() {
		for _, n := range k.EnvNames() {
			byEnv[n] = k
		}
	}
	for _, v := range xxljob.EnvVars() {
		k, ok := byEnv[v.Name]
		require.True(t, ok, "%s (xxljob) is not read by the config loader", v.Name)
		paths := append([]string{k.Path}, k.Aliases...)
		found := false
		for _, p := range paths {
			found = found || strings.EqualFold(p, v.Property)
		}
		require.True(t, found, "%s sets %v in config but %s in xxljob", v.Name, paths, v.Property)
	}
}
