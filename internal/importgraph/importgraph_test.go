package importgraph

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRepositoryImports is the CI check: the module's packages keep to the
// package map.
func TestRepositoryImports(t *testing.T) {
	pkgs, err := List(filepath.Join("..", ".."))
	require.NoError(t, err)
	require.Greater(t, len(pkgs), 20, "go list found too few packages")
	for _, p := range Check(pkgs) {
		t.Error(p)
	}
}

// Each rule catches what it is there for.
func TestCheckRules(t *testing.T) {
	m := func(rel string) string { return Module + "/" + rel }
	for _, tc := range []struct {
		name string
		pkg  Package
		want []string
	}{
		{"downwards is fine", Package{ImportPath: m("handlers"), Imports: []string{m("orders"), m("delay"), m("xxljob"), "net/http"}}, nil},
		{"the wiring may use adapters", Package{ImportPath: m("internal/app"), Imports: []string{m("internal/api"), m("handlers")}}, nil},
		{"upwards", Package{ImportPath: m("orders"), Imports: []string{m("handlers")}},
			[]string{"orders (domain) imports handlers, a layer above it (adapter)"}},
		{"an adapter importing the wiring", Package{ImportPath: m("internal/api"), Imports: []string{m("internal/app")}},
			[]string{"internal/api (adapter) imports internal/app, a layer above it (wiring)"}},
		{"a leaf importing its domain package", Package{ImportPath: m("orders/orderlock"), Imports: []string{m("orders")}},
			[]string{"orders/orderlock (leaf) imports orders, a layer above it (domain)"}},
		{"the lifecycle jobs reaching back into orders", Package{ImportPath: m("orders/lifecycle"), Imports: []string{m("orders")}},
			[]string{"orders/lifecycle (leaf) imports orders, a layer above it (domain)"}},
		{"the outbox relay reaching back into orders", Package{ImportPath: m("orders/outbox"), Imports: []string{m("orders")}},
			[]string{"orders/outbox (leaf) imports orders, a layer above it (domain)"}},
		{"orders writing its events through outbox", Package{ImportPath: m("orders"), Imports: []string{m("orders/outbox")}}, nil},
		{"the close path's SQL text reaching back into orders", Package{ImportPath: m("orders/closesql"), Imports: []string{m("orders")}},
			[]string{"orders/closesql (leaf) imports orders, a layer above it (domain)"}},
		{"the coupon giveback reaching back into orders", Package{ImportPath: m("orders/coupon"), Imports: []string{m("orders")}},
			[]string{"orders/coupon (leaf) imports orders, a layer above it (domain)"}},
		{"orders giving coupons back", Package{ImportPath: m("orders"), Imports: []string{m("orders/coupon")}}, nil},
		{"orders running its SQL text", Package{ImportPath: m("orders"), Imports: []string{m("orders/closesql")}}, nil},
		{"across the domain", Package{ImportPath: m("delay"), Imports: []string{m("orders")}},
			[]string{"delay imports orders: the domain's parts stay independent"}},
		{"the operators' views read orders", Package{ImportPath: m("orders/inspect"), Imports: []string{m("orders"), m("orders/deadletters")}}, nil},
		{"orders reaching its views", Package{ImportPath: m("orders"), Imports: []string{m("orders/inspect")}},
			[]string{"orders imports orders/inspect: the domain's parts stay independent"}},
		{"the payment side builds on orders", Package{ImportPath: m("orders/payment"), Imports: []string{m("orders"), m("orders/orderlock")}}, nil},
		{"orders reaching the payment side", Package{ImportPath: m("orders"), Imports: []string{m("orders/payment")}},
			[]string{"orders imports orders/payment: the domain's parts stay independent"}},
		{"config reads xxljob's admin versions", Package{ImportPath: m("config"), Imports: []string{m("xxljob")}}, nil},
		{"config reads the domain's defaults", Package{ImportPath: m("config"),
			Imports: []string{m("orders"), m("orders/payment"), m("delay"), m("sql/migrations"), m("orders/outbox")}}, nil},
		{"orders reading the configuration", Package{ImportPath: m("orders"), Imports: []string{m("config")}},
			[]string{"orders imports config: the domain's parts stay independent"}},
		{"a test helper in the executor", Package{ImportPath: m("internal/app"), Imports: []string{m("internal/dbtest")}},
			[]string{"internal/app imports the test helper internal/dbtest"}},
		{"a test helper in a command", Package{ImportPath: m("cmd/bench"), Imports: []string{m("internal/ordertest")}}, nil},
		{"HTTP serving reached from delay", Package{ImportPath: m("delay/x"), Deps: []string{"net/http", "net/http/pprof"}},
			[]string{"delay/x reaches net/http/pprof: orders and delay know nothing of XXL-JOB, the configuration or serving HTTP"}},
		{"an unknown package", Package{ImportPath: m("util")},
			[]string{"util: not in the package map (internal/importgraph, docs/development.md)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Check([]Package{tc.pkg}))
		})
	}
}
