package main

import (
	"flag"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// walk calls f for every command of the tree with its path.
func walk(path []*command, c *command, f func(path []*command, c *command)) {
	f(path, c)
	for _, s := range c.sub {
		walk(append(slices.Clone(path), s), s, f)
	}
}

var helpFlagLine = regexp.MustCompile(`(?m)^  -([a-z-]+)`)

// For every command in the table, `-h` exits 0, prints its usage naming the
// command's path, and lists exactly the flags its FlagSet defines; a
// group's help names each of its verbs.
func TestHelpGeneratedFromTheCommandTable(t *testing.T) {
	n := 0
	walk(nil, commandTree(), func(path []*command, c *command) {
		if len(path) == 0 {
			return
		}
		name := pathName(path)
		args := append(strings.Fields(name), "-h")
		code, out, errOut := runCLI(t, nil, args...)
		require.Equal(t, 0, code, "%s: %s", name, errOut)
		require.Empty(t, errOut, name)
		require.Contains(t, out, "usage: executor "+name+" ", name)
		for _, s := range c.sub {
			require.Regexp(t, `(?m)^  `+regexp.QuoteMeta(s.name)+` +\S`, out, "%s lists its verb %s", name, s.name)
		}
		if c.flags == nil {
			return
		}
		n++
		fs, _ := newFlagSet(&cliEnv{}, path)
		var want []string
		fs.VisitAll(func(f *flag.Flag) { want = append(want, f.Name) })
		var got []string
		for _, m := range helpFlagLine.FindAllStringSubmatch(out, -1) {
			got = append(got, m[1])
		}
		slices.Sort(got)
		require.Equal(t, want, got, "%s -h lists exactly its flags", name)
		require.Contains(t, want, "config", name)
	})
	require.Equal(t, 27, n, "commands that run")
}

// The cases of issue 25: what each help shows now.
func TestHelpOfTheCommandsThatDrifted(t *testing.T) {
	_, out, _ := runCLI(t, nil, "deadletter", "requeue", "-h")
	for _, f := range []string{"-status", "-error-like", "-since", "-dry-run", "-stage", "-json", "-config"} {
		require.Regexp(t, `\n  `+f+`[ \n]`, out)
	}
	require.Contains(t, out, "usage: executor deadletter requeue [flags] [ORDERNO]")

	_, out, _ = runCLI(t, nil, "migrate", "status", "-h")
	require.Contains(t, out, "usage: executor migrate status [flags]\n")
	require.NotContains(t, out, "-dry-run")
	_, out, _ = runCLI(t, nil, "migrate", "-h")
	require.Contains(t, out, "-create-database")
	require.Contains(t, out, "\n  status ", "migrate's help lists its status verb")

	_, out, _ = runCLI(t, nil, "serve", "-h")
	for _, want := range []string{"-config", "XXL_JOB_ADMIN_ADDRESSES", "XXL_JOB_ACCESS_TOKEN", "MYSQL_DSN", "docs/configuration.md"} {
		require.Contains(t, out, want)
	}
	// Help words work on groups and on the executor itself.
	for _, args := range [][]string{{"-h"}, {"help"}, {"tasks", "help"}, {"tasks", "--help"}} {
		code, out, _ := runCLI(t, nil, args...)
		require.Equal(t, 0, code, args)
		require.Contains(t, out, "usage: executor ", args)
	}
}

// Flags go before, between or after the positionals; "--" ends them.
func TestInterspersedFlags(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	status := fs.String("status", "", "")
	dry := fs.Bool("dry-run", false, "")
	pos, err := parseInterleaved(fs, []string{"DEMO3", "-status", "waiting", "B", "-dry-run", "--", "-x", "C"})
	require.NoError(t, err)
	require.Equal(t, []string{"DEMO3", "B", "-x", "C"}, pos)
	require.Equal(t, "waiting", *status)
	require.True(t, *dry)
}
