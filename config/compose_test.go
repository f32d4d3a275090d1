package config_test

import (
	"os"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/orderjob/executor/config"
)

// composeFile is what the tests read of docker-compose.yml.
type composeFile struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Build       any               `yaml:"build"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Healthcheck struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
}

const executorImage = "order-job-executor:local"

func readCompose(t *testing.T) (composeFile, string) {
	t.Helper()
	raw, err := os.ReadFile("../docker-compose.yml")
	require.NoError(t, err)
	var doc composeFile
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	return doc, string(raw)
}

// processEnv are variables the executor's containers get that are the
// process's, not configuration keys.
var processEnv = map[string]bool{"TZ": true}

// docker-compose.yml configures the executor through environment variables:
// each one it sets must be a name the loader reads, so the two cannot drift.
func TestComposeEnvironmentNamesAreKnown(t *testing.T) {
	t.Parallel()
	doc, _ := readCompose(t)
	known := map[string]bool{}
	for _, k := range config.Keys() {
		for _, name := range k.EnvNames() {
			known[name] = true
		}
	}
	checked := 0
	for name, svc := range doc.Services {
		if svc.Image != executorImage {
			continue
		}
		require.NotEmpty(t, svc.Environment, "service %s has no environment", name)
		for env := range svc.Environment {
			require.True(t, known[env] || processEnv[env], "docker-compose.yml service %s sets %s, which the config loader does not read", name, env)
			checked++
		}
	}
	require.Greater(t, checked, 10, "the executor services were found in the compose file")
}

// The file's header names, per image, the tools it relies on; every
// healthcheck runs one of those, so none uses a tool its image lacks.
func TestComposeHealthchecksUseToolsTheImagesHave(t *testing.T) {
	t.Parallel()
	doc, raw := readCompose(t)
	tools := map[string]string{} // image (without tag for the local one) → its note
	note := regexp.MustCompile(`(?m)^#   (\S+)\s{2,}(.+)$`)
	for _, m := range note.FindAllStringSubmatch(raw, -1) {
		tools[m[1]] = m[2]
	}
	require.NotEmpty(t, tools, "the header lists no image's tools")
	checks := 0
	for name, svc := range doc.Services {
		hc := svc.Healthcheck.Test
		if len(hc) == 0 {
			continue
		}
		checks++
		require.Equal(t, "CMD", hc[0], "%s: exec form, so no shell the image may lack is implied", name)
		n, ok := tools[svc.Image]
		require.True(t, ok, "%s: the header does not list what %s has", name, svc.Image)
		tool := path.Base(hc[1])
		require.Regexp(t, `\b`+regexp.QuoteMeta(tool)+`\b`, n, "%s: its healthcheck runs %s, which the notes on %s do not name", name, tool, svc.Image)
	}
	require.GreaterOrEqual(t, checks, 4)
	admin := doc.Services["xxl-job-admin"]
	require.Equal(t, []string{"CMD", "bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/8080"}, admin.Healthcheck.Test, "the admin image has no curl")
	require.NotContains(t, tools[admin.Image], "curl,", "the notes must not claim curl in the admin image")
}

// The stack as operators expect it: the schema pinned and checked, proxies
// passed, the console on loopback, executors that scale, local images built,
// the database the tests use.
func TestComposeStack(t *testing.T) {
	t.Parallel()
	doc, _ := readCompose(t)
	schema := doc.Services["admin-schema"].Environment
	require.Regexp(t, `^https://raw\.githubusercontent\.com/xuxueli/xxl-job/[0-9a-f]{40}/doc/db/tables_xxl_job\.sql$`, schema["SCHEMA_URL"], "pinned to a commit")
	require.Regexp(t, `:-[0-9a-f]{64}\}$`, schema["SCHEMA_SHA256"])
	for _, v := range []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"} {
		require.Contains(t, schema, v, "proxy variables pass through")
	}
	for _, p := range doc.Services["xxl-job-admin"].Ports {
		require.True(t, strings.HasPrefix(p, "127.0.0.1:"), "the admin is published on loopback only: %s", p)
	}
	require.Equal(t, "mariadb:10.11", doc.Services["mariadb"].Image)

	exec := doc.Services["executor"]
	require.NotContains(t, exec.Environment, "XXL_JOB_EXECUTOR_ADDRESS", "a fixed address rules out --scale executor=N")
	for _, p := range exec.Ports {
		require.Regexp(t, `^127\.0\.0\.1:\d+-\d+:9998$`, p, "a host port range, so replicas do not collide")
	}
	var oneShots []string
	for name, svc := range doc.Services {
		if svc.Image == executorImage {
			require.NotNil(t, svc.Build, "%s uses the local image: it needs build:", name)
			oneShots = append(oneShots, name)
		}
	}
	require.Contains(t, oneShots, "provision")
	prov := doc.Services["provision"]
	require.Equal(t, "${XXL_JOB_ADMIN_PASSWORD:-123456}", prov.Environment["XXL_JOB_ADMIN_PASSWORD"])
}
