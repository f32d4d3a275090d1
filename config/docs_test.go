package config_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
)

// The environment table of docs/configuration.md is generated from the
// loader's own table, so the documented names are the names read.
func TestConfigurationDocListsEveryKey(t *testing.T) {
	t.Parallel()
	const path, begin, end = "../docs/configuration.md", "<!-- keys:begin -->\n", "<!-- keys:end -->"
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	doc := string(raw)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	require.True(t, i >= 0 && j > i, "%s lacks the %q ... %q markers", path, begin, end)
	want := keyTable()
	if *update {
		doc = doc[:i+len(begin)] + want + doc[j:]
		require.NoError(t, os.WriteFile(path, []byte(doc), 0o644))
	}
	require.Equal(t, want, doc[i+len(begin):j], "run: go test ./config -run TestConfigurationDocListsEveryKey -update")
}

func keyTable() string {
	var b strings.Builder
	b.WriteString("| Key | Environment | Spring Boot's name | Default |\n|---|---|---|---|\n")
	for _, k := range config.Keys() {
		key := "`" + k.Path + "`"
		for _, a := range k.Aliases {
			key += " = `" + a + "`"
		}
		spring := ""
		switch {
		case len(k.EnvAliases) > 0:
			spring = "`" + strings.Join(k.EnvAliases, "`, `") + "`"
		case strings.HasPrefix(k.Path, "xxl.job."):
			spring = "the same"
		}
		def := k.Default
		if def != "" {
			def = "`" + def + "`"
		}
		if k.Secret {
			def = strings.TrimSpace(def + " (secret)")
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s |\n", key, k.Env, spring, def)
	}
	return b.String()
}
