package config_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
)

// The README's "Run it against your admin" block sets only variables the
// loader reads, sets each of the settings a first run needs, and loads as
// written.
func TestReadmeServeBlockLoads(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	readme := string(raw)
	i := strings.Index(readme, "## Run it against your admin\n")
	require.GreaterOrEqual(t, i, 0, "README.md lacks the section")
	block := readme[i:]
	block = block[strings.Index(block, "```sh\n")+len("```sh\n"):]
	block = block[:strings.Index(block, "```")]

	var known []string
	for _, k := range config.Keys() {
		known = append(known, k.EnvNames()...)
	}
	env := map[string]string{}
	// NAME=value or NAME='value', the value up to a space or the quote.
	assign := regexp.MustCompile(`\b([A-Z][A-Z0-9_]+)=('[^']*'|\S+)`)
	for _, line := range strings.Split(block, "\n") {
		line, _, _ = strings.Cut(line, "  #")
		line = strings.ReplaceAll(line, "$(openssl rand -hex 16)", "0123456789abcdef0123456789abcdef")
		for _, m := range assign.FindAllStringSubmatch(line, -1) {
			require.True(t, slices.Contains(known, m[1]), "README sets %s, which the loader does not read", m[1])
			env[m[1]] = strings.Trim(m[2], "'")
		}
	}
	for _, name := range []string{"XXL_JOB_ADMIN_ADDRESSES", "XXL_JOB_ACCESS_TOKEN", "XXL_JOB_EXECUTOR_APPNAME",
		"MYSQL_DSN", "REDIS_ADDR", "EXECUTOR_API_TOKEN", "EXECUTOR_API_CONSOLE_TOKENS"} {
		require.Contains(t, env, name, "the README's serve block sets %s", name)
	}
	c, err := config.LoadWith(nil, envOf(env))
	require.NoError(t, err)
	require.Equal(t, []string{"http://admin:8080"}, c.XXL.Job.Admin.Addresses)
	require.True(t, slices.ContainsFunc(c.API.ConsoleTokens, func(s string) bool { return strings.HasPrefix(s, "alice:") }))
}
