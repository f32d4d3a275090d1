package main

import (
	"flag"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var (
	helpFlagLine = regexp.MustCompile(`(?m)^  -([a-z-]+)`)
	noteFlag     = regexp.MustCompile(`(?:^|[\s\[(])-([a-z][a-z-]*)`)
)

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
		for _, m := range noteFlag.FindAllStringSubmatch(c.note, -1) {
			require.Contains(t, want, m[1], "%s: its note names a flag it does not have", name)
		}
	})
	require.Equal(t, 28, n, "commands that run")
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

// A near miss gets one line naming what was meant and where the help is,
// not the whole help.
func TestDidYouMean(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"deadletters"}, "executor: unknown command \"deadletters\"; did you mean \"deadletter\"?\nrun 'executor -h'\n"},
		{[]string{"migarte"}, "executor: unknown command \"migarte\"; did you mean \"migrate\"?\nrun 'executor -h'\n"},
		{[]string{"xyzzy"}, "executor: unknown command \"xyzzy\"\nrun 'executor -h'\n"},
		{[]string{"tasks", "lsit"}, "executor tasks: unknown subcommand \"lsit\"; did you mean \"list\"?\nrun 'executor tasks -h'\n"},
		{[]string{"refunds", "mark"}, "executor refunds: unknown subcommand \"mark\"; did you mean \"mark-refunded\"?\n"},
		{[]string{"deadletter", "list", "-stauts", "parked"}, "executor deadletter list: flag provided but not defined: -stauts; did you mean -status?\nrun 'executor deadletter list -h'\n"},
		{[]string{"run", "demoJob", "--parm", "2"}, "flag provided but not defined: -parm; did you mean -param?"},
		{[]string{"-conifg", "x.yml", "serve"}, "executor: flag provided but not defined: -conifg; did you mean -config?\nrun 'executor -h'\n"},
		{[]string{"migrate", "stauts"}, "executor migrate: unexpected argument \"stauts\"; did you mean \"status\"?"},
	} {
		code, out, errOut := runCLI(t, nil, tc.args...)
		require.Equal(t, 2, code, tc.args)
		require.Empty(t, out, tc.args)
		require.Contains(t, errOut, tc.want, tc.args)
		require.LessOrEqual(t, strings.Count(errOut, "\n"), 3, "a short answer: %q", errOut)
	}
}

// `executor completion bash` completes commands, verbs and each command's
// own flags, in a real bash.
func TestBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	code, script, errOut := runCLI(t, nil, "completion", "bash")
	require.Equal(t, 0, code, errOut)
	complete := func(words ...string) []string {
		t.Helper()
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		prog := script + fmt.Sprintf("\nCOMP_WORDS=(%s); COMP_CWORD=%d; _executor; printf '%%s\\n' \"${COMPREPLY[@]}\"\n",
			strings.Join(quoted, " "), len(words)-1)
		out, err := exec.Command(bash, "--norc", "-c", prog).CombinedOutput()
		require.NoError(t, err, string(out))
		return strings.Fields(string(out))
	}
	require.Equal(t, []string{"demo-data", "deadletter"}, complete("executor", "de"))
	require.Equal(t, []string{"list", "show", "requeue"}, complete("executor", "deadletter", ""))
	require.Equal(t, []string{"-dry-run"}, complete("executor", "-config", "x.yml", "deadletter", "requeue", "DEMO3", "-dr"))
	require.Equal(t, []string{"status"}, complete("executor", "migrate", "st"))
	require.Equal(t, []string{"-param"}, complete("executor", "run", "demoJob", "-pa"))
	code, _, errOut = runCLI(t, nil, "completion", "fish")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, `shell "fish": only bash is supported`)
}
