package config_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/xxljob"
)

// xxljob.ConfigFromEnv and this loader read one table of environment
// names: every variable xxljob reads is read here for the same key, and for
// every key they share, each name read here is one xxljob reads.
func TestXXLJobEnvironmentNamesAgree(t *testing.T) {
	t.Parallel()
	byPath := map[string]config.Key{}
	for _, k := range config.Keys() {
		for _, p := range append([]string{k.Path}, k.Aliases...) {
			byPath[strings.ToLower(p)] = k
		}
	}
	theirs := map[string][]string{} // our key's path → the names xxljob reads for it
	for _, v := range xxljob.EnvVars() {
		k, ok := byPath[strings.ToLower(v.Property)]
		require.True(t, ok, "xxljob reads %s for %s, a key this loader does not have", v.Name, v.Property)
		require.Contains(t, k.EnvNames(), v.Name, "xxljob reads %s for %s; this loader does not", v.Name, k.Path)
		theirs[k.Path] = append(theirs[k.Path], v.Name)
	}
	require.NotEmpty(t, theirs)
	for _, k := range config.Keys() {
		names, shared := theirs[k.Path]
		if !shared {
			continue
		}
		for _, n := range k.EnvNames() {
			require.True(t, slices.Contains(names, n), "this loader reads %s for %s; xxljob.ConfigFromEnv does not", n, k.Path)
		}
	}
	require.ElementsMatch(t, xxljob.TokenEnvVars, byPath["xxl.job.accesstoken"].EnvNames(), "the token's names")
}
