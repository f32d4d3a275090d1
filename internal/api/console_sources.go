package api

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/orders/deadletters"
	"github.com/orderjob/executor/orders/inspect"
	"github.com/orderjob/executor/orders/oplist"
	"github.com/orderjob/executor/orders/outbox"
	"github.com/orderjob/executor/orders/refunds"
)

// The console's order databases: the pages that read order data (the
// overview, the dead letters, the outbox, the refunds, the close runs, the
// fulfilment flags, an order's view, the delayed tasks) take ?source=NAME,
// an order source of order.sources, and read its database; without it
// they read mysql.dsn's. Links and forms of such a page carry the source
// on.

// ConsoleSource is an order database the console's pages can read.
type ConsoleSource struct {
	// Name is the source's name in order.sources (?source=NAME).
	Name string
	// DB is its database. Required.
	DB *sqlx.DB
	// View looks its orders up (inspect.View.InTables: in its order
	// tables) and counts the due orders of the close's units of them
	// (inspect.View.CountingDue). Required.
	View *inspect.View
	// Home says the source is on mysql.dsn's database (ConsoleConfig.DB):
	// a page without ?source= looks orders up and counts due orders with
	// its View (the last such source's).
	Home bool
	// Tasks reads and acts on the delayed tasks of its database; required
	// with ConsoleConfig.Tasks unless Home (ConsoleConfig.Tasks serves it).
	Tasks *delay.Client
}

// orderViews are the console's views of one order database.
type orderViews struct {
	letters *deadletters.Ops
	outbox  *outbox.Ops
	refunds *refunds.Ops
	runs    *inspect.CloseRuns
	inspect *inspect.View
	tasks   *delay.Client // nil without delayed tasks
}

func newOrderViews(db *sqlx.DB, view *inspect.View, tasks *delay.Client) *orderViews {
	return &orderViews{letters: deadletters.New(db), outbox: outbox.NewOps(db), refunds: refunds.New(db),
		runs: inspect.NewCloseRuns(db), inspect: view, tasks: tasks}
}

// consoleViews builds the views of mysql.dsn's database (home) and of each
// source, by name; names lists the sources in order, nil without any.
func consoleViews(cfg ConsoleConfig) (views Sourced[*orderViews], names []string, err error) {
	home := inspect.New(cfg.DB, cfg.Mode)
	if cfg.Schema.Declared {
		if home, err = home.InTables(cfg.Schema, []string{cfg.Schema.Orders.Table}); err != nil {
			return views, nil, err
		}
	}
	home = home.CountingDue(cfg.Due...)
	for _, s := range cfg.Sources {
		if s.Home && s.View != nil {
			home = s.View
		}
	}
	if len(cfg.Sources) == 0 {
		return HomeOnly(newOrderViews(cfg.DB, home, cfg.Tasks)), nil, nil
	}
	views = Sourced[*orderViews]{Home: newOrderViews(cfg.DB, home, cfg.Tasks), By: map[string]*orderViews{}}
	for _, s := range cfg.Sources {
		switch {
		case s.Name == "" || s.DB == nil || s.View == nil:
			return views, nil, errors.New("api: a ConsoleSource needs a Name, a DB and a View")
		case views.By[s.Name] != nil:
			return views, nil, fmt.Errorf("api: console source %s is listed twice", s.Name)
		case cfg.Tasks != nil && !s.Home && s.Tasks == nil:
			return views, nil, fmt.Errorf("api: console source %s needs the Tasks of its database", s.Name)
		}
		tasks := s.Tasks
		if s.Home || cfg.Tasks == nil {
			tasks = cfg.Tasks
		}
		views.By[s.Name] = newOrderViews(s.DB, s.View, tasks)
		names = append(names, s.Name)
	}
	return views, names, nil
}

// viewsOf returns the views of the request's ?source=: an unknown name is
// an invalid input listing the sources (a 400 page).
func (c *Console) viewsOf(r *http.Request) (*orderViews, error) {
	return c.views.pick(r)
}

// sourcedQuery reads the query parameters of a page reading an order
// source (query: allowed and source) and the views of its source.
func (c *Console) sourcedQuery(r *http.Request, allowed ...string) (url.Values, *orderViews, error) {
	q, err := query(r, append(allowed, "source")...)
	if err != nil {
		return nil, nil, err
	}
	v, err := c.viewsOf(r)
	return q, v, err
}

// sourcedListQuery is sourcedQuery for a list page, with the cursor of
// its page (after, which allowed names).
func (c *Console) sourcedListQuery(r *http.Request, allowed ...string) (url.Values, *orderViews, oplist.Cursor, error) {
	q, v, err := c.sourcedQuery(r, allowed...)
	if err != nil {
		return nil, nil, oplist.Cursor{}, err
	}
	after, err := oplist.ParseCursor(q.Get("after"))
	return q, v, after, err
}

// requestSource is the request's ?source=, "" for mysql.dsn's database.
func requestSource(r *http.Request) string { return r.URL.Query().Get("source") }

// withSource is the console URL u carrying the request's ?source= on.
func withSource(r *http.Request, u string) string {
	s := requestSource(r)
	if s == "" {
		return u
	}
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	return u + sep + "source=" + url.QueryEscape(s)
}

// inSource is what a page looks for, with the source it looks in: "order
// O-1 in source db1" (as it is without ?source=).
func inSource(r *http.Request, what string) string {
	if s := requestSource(r); s != "" {
		return what + " in source " + s
	}
	return what
}

// pageFor returns the template of page for a request reading source: the
// parsed page itself for mysql.dsn's database, else a copy whose src
// function carries the source on the links of nested templates (the
// order links, the rows of a list). The copy is made from pages never
// executed, as html/template can only clone those.
func (c *Console) pageFor(page, source string) (*template.Template, error) {
	if source == "" {
		return c.pages[page], nil
	}
	t, err := c.pristine[page].Clone()
	if err != nil {
		return nil, fmt.Errorf("console template %s: %w", page, err)
	}
	q := "?source=" + url.QueryEscape(source)
	return t.Funcs(template.FuncMap{"src": func() string { return q }}), nil
}
