package metrics_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/orderjob/executor/internal/doclinks"
	"github.com/orderjob/executor/internal/metrics"
)

// deployDir is the repository's deploy/ folder.
var deployDir = filepath.Join("..", "..", "deploy")

// promSynthesized are series Prometheus itself makes per target.
var promSynthesized = map[string]bool{"up": true, "scrape_duration_seconds": true, "scrape_samples_scraped": true}

// exported is the set of series names the executor can export.
func exported(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, n := range metrics.New(metrics.Config{}).Names() {
		out[n] = true
	}
	for n := range promSynthesized {
		out[n] = true
	}
	return out
}

// promqlKeywords are words of PromQL that are not series names.
var promqlKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true,
	"atan2": true, "start": true, "end": true,
}

var (
	promqlStrings  = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promqlVars     = regexp.MustCompile(`\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*`)
	promqlMatchers = regexp.MustCompile(`\{[^{}]*\}`)
	promqlRanges   = regexp.MustCompile(`\[[^\[\]]*\]`)
	promqlGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promqlWord     = regexp.MustCompile(`[A-Za-z0-9_:.]+`)
)

// seriesNames returns the series names an expression selects: every word
// that is not a function or aggregation (followed by "("), a keyword, a
// number or duration, a label (in a matcher or a grouping), a string or a
// dashboard variable. Templating queries such as label_values(name, label)
// name the series in their first argument.
func seriesNames(expr string) []string {
	if m := regexp.MustCompile(`^\s*label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*[,)]`).FindStringSubmatch(expr); m != nil {
		return []string{m[1]}
	}
	e := promqlStrings.ReplaceAllString(expr, " ")
	e = promqlVars.ReplaceAllString(e, " ")
	e = promqlMatchers.ReplaceAllString(e, " ")
	e = promqlRanges.ReplaceAllString(e, " ")
	e = promqlGrouping.ReplaceAllString(e, " ")
	var out []string
	for _, loc := range promqlWord.FindAllStringIndex(e, -1) {
		w := e[loc[0]:loc[1]]
		if w[0] >= '0' && w[0] <= '9' || w[0] == '.' || promqlKeywords[strings.ToLower(w)] {
			continue
		}
		if rest := strings.TrimLeft(e[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // a function or an aggregation
		}
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	return out
}

func TestSeriesNames(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string][]string{
		`up{job="order-job-executor"} == 0`:                                                         {"up"},
		`max by (source, stage) (orders_dead_letters{status="waiting"}) > 0`:                        {"orders_dead_letters"},
		`time() - xxljob_registry_last_success_timestamp_seconds > 90`:                              {"xxljob_registry_last_success_timestamp_seconds"},
		`histogram_quantile(0.99, sum by (le) (rate(a_bucket{x=~"$i"}[5m]))) > 2`:                   {"a_bucket"},
		`sum(rate(x_total{result="taken",i=~"$i"}[$__rate_interval])) / sum(rate(y[1m] offset 5m))`: {"x_total", "y"},
		`min_over_time(s[15m:1m]) > 0 and on (instance) t unless ignoring (a, b) u`:                 {"s", "t", "u"},
		`label_values(xxljob_registry_heartbeats_total, instance)`:                                  {"xxljob_registry_heartbeats_total"},
		`sum by (handler) (rate(m{handler="by (x)"}[5m])) * 60 + 1e3`:                               {"m"},
	} {
		require.Equal(t, want, seriesNames(expr), expr)
	}
}

// Every alerting rule parses, has the fields Prometheus and its receivers
// need, and queries only series the executor exports.
func TestAlertRulesUseExportedMetrics(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(deployDir, "prometheus", "alerts.yml"))
	require.NoError(t, err)
	var file struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Record      string            `yaml:"record"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&file))
	names := exported(t)
	rb, err := os.ReadFile(filepath.Join("..", "..", "docs", "runbooks.md"))
	require.NoError(t, err)
	runbookAnchors := doclinks.Anchors(string(rb))
	alerts := map[string]bool{}
	used := map[string]bool{}
	for _, g := range file.Groups {
		require.NotEmpty(t, g.Name)
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "only alerting rules here: %+v", r)
			require.False(t, alerts[r.Alert], "alert %s defined twice", r.Alert)
			alerts[r.Alert] = true
			require.NotEmpty(t, r.Expr, r.Alert)
			require.Contains(t, r.Labels, "severity", r.Alert)
			require.NotEmpty(t, r.Annotations["summary"], r.Alert)
			// A rule without for: fires on one evaluation's blip.
			require.Regexp(t, `^\d+[smh]$`, r.For, "%s: every rule needs a for:", r.Alert)
			// Each links its runbook section, which must exist.
			const runbooks = "https://github.com/orderjob/executor/blob/main/docs/runbooks.md#"
			require.True(t, strings.HasPrefix(r.Annotations["runbook_url"], runbooks), "%s: runbook_url %q", r.Alert, r.Annotations["runbook_url"])
			anchor := strings.TrimPrefix(r.Annotations["runbook_url"], runbooks)
			require.Equal(t, doclinks.Slug(r.Alert), anchor, "%s: the runbook anchor is the alert's heading", r.Alert)
			require.True(t, runbookAnchors[anchor], "%s: docs/runbooks.md has no section %q", r.Alert, anchor)
			series := seriesNames(r.Expr)
			require.NotEmpty(t, series, "%s: no series in %q", r.Alert, r.Expr)
			for _, s := range series {
				require.True(t, names[s], "alert %s queries %q, which the executor does not export", r.Alert, s)
				used[s] = true
			}
		}
	}
	// The alert table of docs/monitoring.md lists every rule, and no other.
	mon, err := os.ReadFile(filepath.Join("..", "..", "docs", "monitoring.md"))
	require.NoError(t, err)
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(\\w+)` \\| (?:page|ticket) \\|").FindAllStringSubmatch(string(mon), -1) {
		documented[m[1]] = true
	}
	require.Equal(t, alerts, documented, "docs/monitoring.md's alert table and deploy/prometheus/alerts.yml")
	require.True(t, used[metrics.XXLRegistryLastSuccess])

	// Every rule has a promtool test in which it fires.
	b, err = os.ReadFile(filepath.Join(deployDir, "prometheus", "alerts_test.yml"))
	require.NoError(t, err)
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `yaml:"alertname"`
				ExpAlerts []any  `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	require.NoError(t, yaml.Unmarshal(b, &tests))
	fires := map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			require.True(t, alerts[a.Alertname], "alerts_test.yml tests %s, which alerts.yml does not define", a.Alertname)
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			}
		}
	}
	for a := range alerts {
		require.True(t, fires[a], "alerts_test.yml has no test in which %s fires", a)
	}
}

// The dashboard is valid JSON, and every query (panels and templating)
// names only series the executor exports.
func TestDashboardUsesExportedMetrics(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(deployDir, "grafana", "dashboards", "order-job-executor.json"))
	require.NoError(t, err)
	var dash map[string]any
	require.NoError(t, json.Unmarshal(b, &dash))
	require.Equal(t, "order-job-executor", dash["uid"])

	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || (k == "query" && strings.Contains(s, "("))) {
					exprs = append(exprs, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(dash)
	require.Greater(t, len(exprs), 20)
	names := exported(t)
	used := map[string]bool{}
	for _, e := range exprs {
		series := seriesNames(e)
		require.NotEmpty(t, series, "no series in %q", e)
		for _, s := range series {
			require.True(t, names[s], "dashboard queries %q, which the executor does not export (in %q)", s, e)
			used[s] = true
		}
	}
	// The headline metrics are on it.
	for _, n := range []string{metrics.OrdersClosedTotal, metrics.OrdersOverdueUnpaid, metrics.OrdersDeadLetters,
		metrics.XXLRunsTotal, metrics.DelayLatenessSeconds + "_bucket", metrics.OrdersLatenessSeconds + "_bucket"} {
		require.True(t, used[n], "dashboard lacks %s", n)
	}
}

// The monitoring profile's files exist where docker-compose.yml mounts them,
// and Prometheus scrapes the executor's API port.
func TestMonitoringProvisioning(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join(deployDir, "prometheus", "prometheus.yml"))
	require.NoError(t, err)
	var prom struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName      string `yaml:"job_name"`
			MetricsPath  string `yaml:"metrics_path"`
			DNSSDConfigs []struct {
				Names []string `yaml:"names"`
				Type  string   `yaml:"type"`
				Port  int      `yaml:"port"`
			} `yaml:"dns_sd_configs"`
		} `yaml:"scrape_configs"`
	}
	require.NoError(t, yaml.Unmarshal(b, &prom))
	require.Equal(t, []string{"alerts.yml"}, prom.RuleFiles, "beside prometheus.yml in the container and in deploy/prometheus")
	require.Len(t, prom.ScrapeConfigs, 1)
	sc := prom.ScrapeConfigs[0]
	require.Equal(t, "order-job-executor", sc.JobName, "the alerts' up{job=...} uses it")
	require.Equal(t, "/metrics", sc.MetricsPath)
	// Every replica of a scaled executor service is a target of its own.
	require.Len(t, sc.DNSSDConfigs, 1)
	require.Equal(t, []string{"executor"}, sc.DNSSDConfigs[0].Names)
	require.Equal(t, "A", sc.DNSSDConfigs[0].Type)
	require.Equal(t, 9998, sc.DNSSDConfigs[0].Port)

	b, err = os.ReadFile(filepath.Join("..", "..", "docker-compose.yml"))
	require.NoError(t, err)
	var compose struct {
		Services map[string]struct {
			Profiles []string `yaml:"profiles"`
			Volumes  []string `yaml:"volumes"`
		} `yaml:"services"`
	}
	require.NoError(t, yaml.Unmarshal(b, &compose))
	for _, name := range []string{"prometheus", "grafana"} {
		svc, ok := compose.Services[name]
		require.True(t, ok, "docker-compose.yml has no %s service", name)
		require.Equal(t, []string{"monitoring"}, svc.Profiles, name)
		for _, v := range svc.Volumes {
			host, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(host, "./") {
				_, err := os.Stat(filepath.Join("..", "..", host))
				require.NoError(t, err, "%s mounts %s", name, host)
			}
		}
	}
}
