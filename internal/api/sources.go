package api

import (
	"maps"
	"net/http"
	"slices"
	"strings"
)

// Sourced is an operator view per order database, for the routes that take
// ?source=: Home serves a request without it (mysql.dsn's database), By
// the order source it names (order.sources; a source on mysql.dsn's
// database has Home's view).
type Sourced[V any] struct {
	Home V
	By   map[string]V
}

// HomeOnly is a Sourced of mysql.dsn's view alone: ?source= names no
// database but "default".
func HomeOnly[V any](v V) Sourced[V] {
	return Sourced[V]{Home: v, By: map[string]V{"default": v}}
}

// pick returns the view of the request's ?source=, Home without one; an
// unknown name is an invalid input that lists the sources.
func (s Sourced[V]) pick(r *http.Request) (V, error) {
	name := r.URL.Query().Get("source")
	if name == "" {
		return s.Home, nil
	}
	if v, ok := s.By[name]; ok {
		return v, nil
	}
	var zero V
	return zero, invalidInput("source", "source %q is not an order source (the sources: %s)",
		name, strings.Join(slices.Sorted(maps.Keys(s.By)), ", "))
}

// logSource is the request's ?source= as log attributes: none without one.
func logSource(r *http.Request) []any {
	if s := r.URL.Query().Get("source"); s != "" {
		return []any{"source", s}
	}
	return nil
}
