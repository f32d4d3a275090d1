package config

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// ConsoleOperator is one entry of api.consoleTokens: who signs in with
// which token.
type ConsoleOperator struct {
	Name, Token string
}

// consoleName is what an operator's name may hold: it is shown and recorded
// with every action, so it stays short and plain.
var consoleName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// MinTokenLength is the shortest token accepted for xxl.job.accessToken,
// api.token and each of api.consoleTokens: every surface that checks one is
// exposed to guessing, so a token must be long enough not to be guessed.
const MinTokenLength = 16

// ConsoleOperators reads api.consoleTokens (name:token each). Entries that
// do not parse are left out; validation reports them.
func (a API) ConsoleOperators() []ConsoleOperator {
	var ops []ConsoleOperator
	for _, e := range a.ConsoleTokens {
		name, token, ok := strings.Cut(strings.TrimSpace(e), ":")
		if ok {
			ops = append(ops, ConsoleOperator{Name: name, Token: token})
		}
	}
	return ops
}

// consoleProblems checks the console keys; the tokens themselves are never
// quoted in a message.
func (a API) consoleProblems() []error {
	var p []error
	bad := func(format string, args ...any) { p = append(p, fmt.Errorf(format, args...)) }
	if a.ConsoleSession < 5*time.Minute || a.ConsoleSession > 7*24*time.Hour {
		bad("api.consoleSession: %s is outside 5m..168h", a.ConsoleSession)
	}
	names, tokens := map[string]bool{}, map[string]string{}
	for i, e := range a.ConsoleTokens {
		name, token, ok := strings.Cut(strings.TrimSpace(e), ":")
		switch {
		case !ok:
			bad("api.consoleTokens: entry %d is not name:token", i+1)
			continue
		case !consoleName.MatchString(name):
			bad("api.consoleTokens: entry %d: name %q must be 1-64 of A-Z a-z 0-9 . _ @ - (starting with a letter or digit)", i+1, name)
		case names[name]:
			bad("api.consoleTokens: name %q is given twice", name)
		}
		names[name] = true
		switch {
		case len(token) < MinTokenLength:
			bad("api.consoleTokens: the token of %q is shorter than %d characters", name, MinTokenLength)
		case strings.ContainsAny(token, " \t,"):
			bad("api.consoleTokens: the token of %q holds a space or a comma", name)
		case tokens[token] != "":
			bad("api.consoleTokens: %q and %q have the same token (tokens are personal)", tokens[token], name)
		}
		tokens[token] = name
	}
	return p
}
