// Package importgraph checks the module's import graph against its package
// map (docs/development.md, Layout): dependencies point one way, from the
// commands down to the leaves, test helpers serve only tests and commands,
// and orders and delay import nothing of XXL-JOB, of the configuration or
// of serving HTTP. Its test runs the check on the repository.
package importgraph

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
)

// Module is the import path of the main module.
const Module = "github.com/orderjob/executor"

// Package is what the check reads of one package (as `go list -json`
// prints it).
type Package struct {
	ImportPath string
	Imports    []string // direct, non-test
	Deps       []string // transitive, non-test
}

// The layers, top first: a package imports only from its own layer or the
// ones below it.
const (
	layerCommand = iota // cmd/..., examples/...
	layerWiring         // internal/app
	layerAdapter        // handlers, the API port, metrics, provisioning, the log handler, demo data
	layerDomain         // orders, orders/inspect, orders/payment, delay, xxljob, config, sql/migrations
	layerLeaf           // the domain's own sub-packages and the small shared helpers
)

var layerNames = []string{"command", "wiring", "adapter", "domain", "leaf"}

var adapters = []string{"handlers", "internal/api", "internal/metrics", "internal/provision", "internal/logctx", "internal/orderdemo"}

// domain lists the domain packages. orders/inspect (the operators' views)
// and orders/payment (the order service's side of the close's rules) build
// on orders, so they sit beside it rather than below it.
var domain = []string{"orders", "orders/inspect", "orders/payment", "delay", "xxljob", "config", "sql/migrations"}

// testHelpers serve tests (and cmd/bench), never the executor itself.
var testHelpers = []string{"internal/dbtest", "internal/redistest", "internal/mariadbtest", "internal/rabbittest",
	"internal/delaytest", "internal/ordertest", "internal/paytest", "internal/metricstest", "internal/plantest", "internal/statslie", "internal/fakeconsole",
	"internal/faults", "internal/doclinks", "internal/importgraph", "internal/syncbuf"}

// Within the domain layer the parts stay independent; these are the only
// imports across it (the operators' views and the payment side read
// orders' types, never the other way round; config reads the defaults the
// other parts own, so each is declared once, and orders and delay never
// read config).
var domainImports = map[string][]string{
	"config":         {"xxljob", "orders", "orders/payment", "delay", "sql/migrations"},
	"orders/inspect": {"orders"}, "orders/payment": {"orders"},
}

// notForDomain is what orders and delay (and their sub-packages) must not
// reach, directly or not: XXL-JOB, the configuration, and serving HTTP.
var notForDomain = []string{Module + "/xxljob", Module + "/config", Module + "/handlers", Module + "/internal/api",
	Module + "/internal/app", Module + "/internal/metrics", "net/http/pprof", "net/http/httptest",
	"github.com/prometheus/client_golang/prometheus/promhttp"}

// under reports whether rel is p or a package below it.
func under(rel, p string) bool { return rel == p || strings.HasPrefix(rel, p+"/") }

func underAny(rel string, ps []string) bool {
	return slices.ContainsFunc(ps, func(p string) bool { return under(rel, p) })
}

// layer places rel (an import path relative to the module); ok is false for
// a package the map does not know.
func layer(rel string) (l int, ok bool) {
	switch {
	case under(rel, "cmd"), under(rel, "examples"):
		return layerCommand, true
	case under(rel, "internal/app"):
		return layerWiring, true
	case underAny(rel, adapters):
		return layerAdapter, true
	case slices.Contains(domain, rel):
		return layerDomain, true
	case under(rel, "orders"), under(rel, "delay"), under(rel, "xxljob"), under(rel, "internal"):
		return layerLeaf, true
	}
	return 0, false
}

// Check returns every way pkgs break the map, one line each.
func Check(pkgs []Package) []string {
	var problems []string
	for _, p := range pkgs {
		rel, ok := strings.CutPrefix(p.ImportPath, Module+"/")
		if !ok {
			continue
		}
		helper := underAny(rel, testHelpers)
		from, known := layer(rel)
		if !known && !helper {
			problems = append(problems, fmt.Sprintf("%s: not in the package map (internal/importgraph, docs/development.md)", rel))
			continue
		}
		for _, imp := range p.Imports {
			irel, ok := strings.CutPrefix(imp, Module+"/")
			if !ok {
				continue
			}
			if underAny(irel, testHelpers) {
				if !helper && from != layerCommand {
					problems = append(problems, fmt.Sprintf("%s imports the test helper %s", rel, irel))
				}
				continue
			}
			if helper {
				continue // test helpers may use anything below the commands
			}
			to, known := layer(irel)
			switch {
			case !known:
				continue // reported as a package of its own
			case to < from:
				problems = append(problems, fmt.Sprintf("%s (%s) imports %s, a layer above it (%s)", rel, layerNames[from], irel, layerNames[to]))
			case to == layerDomain && from == layerDomain && !slices.Contains(domainImports[rel], irel):
				problems = append(problems, fmt.Sprintf("%s imports %s: the domain's parts stay independent", rel, irel))
			}
		}
		if under(rel, "orders") || under(rel, "delay") {
			for _, d := range p.Deps {
				if slices.ContainsFunc(notForDomain, func(n string) bool { return d == n || strings.HasPrefix(d, n+"/") }) {
					problems = append(problems, fmt.Sprintf("%s reaches %s: orders and delay know nothing of XXL-JOB, the configuration or serving HTTP", rel, d))
				}
			}
		}
	}
	return problems
}

// List runs `go list -json` on the module's packages below dir.
func List(dir string) ([]Package, error) {
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	var pkgs []Package
	for {
		var p Package
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("go list: decode: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}
