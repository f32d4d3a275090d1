package api

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/orderjob/executor/delay"
	"github.com/orderjob/executor/internal/keyset"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/deadletters"
	"github.com/orderjob/executor/orders/inspect"
	"github.com/orderjob/executor/orders/oplist"
	"github.com/orderjob/executor/orders/schema"
)

// The console's read-only pages: the overview, the lists and the details.

// pageNames are the templates under console/, each rendered inside
// layout.html.
var pageNames = []string{"off", "error", "signin", "overview", "deadletters", "deadletter", "order", "ordersearch", "noorder",
	"tasks", "task", "flags", "runs", "confirm", "done", "outboxlist", "outboxevent", "refundlist", "refund"}

var consoleFuncs = template.FuncMap{
	"wall": wallText,
	"utc":  utcText,
	// shopTime renders a time of a declared order table: a wall clock, or
	// for an epoch schema the instant in UTC (the order view reads epoch
	// times as UTC).
	"shopTime": func(o schema.Orders, t time.Time) string {
		if o.TimeUnit.Epoch() {
			return utcText(t)
		}
		return wallText(t)
	},
	"dur":    roundDuration,
	"path":   url.PathEscape,
	"list":   func(s ...string) []string { return s },
	"capped": capped,
	// src is the ?source= of a page reading an order source, for links
	// in nested templates ("" on mysql.dsn's; see Console.pageFor).
	"src": func() string { return "" },
}

// consoleTimeLayout is the one format of the console's times, in lists,
// details and the changes an action made.
const consoleTimeLayout = "2006-01-02 15:04:05.000"

// wallText renders a wall-clock time of the database session (order
// tables) to the millisecond.
func wallText(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.Format(consoleTimeLayout)
}

// utcText renders a UTC time of the delayed-task and outbox tables.
func utcText(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format(consoleTimeLayout) + " UTC"
}

// capped renders a bounded count: "10000+" at the cap.
func capped(n int) string {
	if n >= inspect.CountCap {
		return fmt.Sprintf("%d+", n)
	}
	return strconv.Itoa(n)
}

// roundDuration renders d for people: 3.2s, 4m10s, 2h5m, 3d4h.
func roundDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	}
	days := int(d / (24 * time.Hour))
	return fmt.Sprintf("%dd%dh", days, int((d-time.Duration(days)*24*time.Hour)/time.Hour))
}

func parsePages() (map[string]*template.Template, error) {
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(consoleFuncs).ParseFS(consoleFiles, "console/layout.html", "console/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("api: console template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

// overviewData is the overview page: cards of figures, each linking to
// its list, and the recent close runs.
type overviewData struct {
	Cards    []card
	Runs     []inspect.CloseRun
	Problems []string // figures that could not be read
}

type card struct {
	Title   string
	Figures []figure
}

// figure is one number of the overview; Class is "bad" or "warn" when it
// wants a person's attention.
type figure struct {
	Label, Value, Link, Class string
}

// attention is the class of a count that should be zero.
func attention(n int, class string) string {
	if n > 0 {
		return class
	}
	return ""
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, op *session) {
	ctx := r.Context()
	v, err := c.viewsOf(r)
	if err != nil {
		c.failErr(w, r, op, err)
		return
	}
	var d overviewData
	note := func(what string, err error) bool {
		if err != nil {
			c.log.WarnContext(ctx, "console overview", append([]any{"figure", what, "err", err}, logSource(r)...)...)
			d.Problems = append(d.Problems, what+": "+err.Error())
		}
		return err == nil
	}
	for _, f := range []struct {
		what string
		card func(context.Context, *orderViews) (*card, error)
	}{
		{"due orders", c.dueCard},
		{"dead letters", c.deadLetterCard},
		{"refunds owed", c.refundCard},
		{"outbox", c.outboxCard},
		{"delayed tasks", c.taskCard},
		{"fulfilment flags", c.fulfilmentCard},
		{"close runs of the last hour", c.closeRunCard},
	} {
		if k, err := f.card(ctx, v); note(f.what, err) && k != nil {
			for i := range k.Figures {
				k.Figures[i].Link = withSource(r, k.Figures[i].Link)
			}
			d.Cards = append(d.Cards, *k)
		}
	}
	d.Runs, err = v.runs.Recent(ctx, 0, 10)
	note("recent close runs", err)
	c.render(w, r, http.StatusOK, "overview", op, pageData{Title: "Overview", Nav: "overview", Sourced: true, Data: d})
}

// The overview's cards, in their order on the page, each of the views of
// the request's source (the overview carries the source on their links).
// A card that is not shown is nil; an error is listed among the page's
// problems.

func (c *Console) dueCard(ctx context.Context, v *orderViews) (*card, error) {
	due, err := v.inspect.DueOrders(ctx)
	if err != nil {
		return nil, err
	}
	return &card{"Orders due to close", []figure{
		// An order a dead letter holds back (parked, or waiting for its
		// retry) is due too, but the sweep leaves it to the letter: it is
		// counted under Dead letters, and the label says so.
		{"due now, not held back by a dead letter", capped(due.Count), consolePath + "runs", attention(due.Count, "warn")},
		{"oldest due for", roundDuration(due.Oldest), consolePath + "runs", ""},
	}}, nil
}

func (c *Console) deadLetterCard(ctx context.Context, v *orderViews) (*card, error) {
	n, err := v.inspect.DeadLetterCounts(ctx)
	if err != nil {
		return nil, err
	}
	link := func(st string) string { return consolePath + "dead-letters?status=" + st }
	return &card{"Dead letters", []figure{
		{"parked (need a person)", capped(n[deadletters.Parked]), link("parked"), attention(n[deadletters.Parked], "bad")},
		{"waiting for a retry", capped(n[deadletters.Waiting]), link("waiting"), attention(n[deadletters.Waiting], "warn")},
		{"resolved", capped(n[deadletters.Resolved]), link("resolved"), ""},
	}}, nil
}

func (c *Console) refundCard(ctx context.Context, v *orderViews) (*card, error) {
	o, err := v.refunds.Owed(ctx)
	if err != nil {
		return nil, err
	}
	return &card{"Refunds owed (payment conflicts)", []figure{
		{"payments to pay back", strconv.Itoa(o.Count), consolePath + "refunds?status=owed", attention(o.Count, "bad")},
		{"amount owed", o.Amount, consolePath + "refunds?status=owed", ""},
		{"oldest owed for", roundDuration(o.OldestAge), consolePath + "refunds?status=owed", ""},
		{"recorded in all", strconv.Itoa(o.Total), consolePath + "refunds", ""},
	}}, nil
}

// outboxCard is shown in outbox mode, or when events are left from a time
// the executor ran in it; outside outbox mode an error reading it hides it.
func (c *Console) outboxCard(ctx context.Context, v *orderViews) (*card, error) {
	s, err := v.outbox.Stats(ctx)
	if shown := c.cfg.Mode == orders.CompensateOutbox || err == nil && s.Pending+s.Parked > 0; !shown {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &card{"Outbox (stock and coupon events)", []figure{
		{"pending delivery", strconv.Itoa(s.Pending), consolePath + "outbox?status=pending", attention(s.Pending, "warn")},
		{"oldest pending for", roundDuration(time.Duration(s.OldestPendingAgeSeconds * float64(time.Second))), consolePath + "outbox?status=pending", ""},
		{"parked (need a person)", strconv.Itoa(s.Parked), consolePath + "outbox?status=parked", attention(s.Parked, "bad")},
	}}, nil
}

// taskCard is shown when the executor has delayed tasks.
func (c *Console) taskCard(ctx context.Context, v *orderViews) (*card, error) {
	if v.tasks == nil {
		return nil, nil
	}
	t, err := v.tasks.Tallies(ctx)
	if err != nil {
		return nil, err
	}
	link := func(st delay.Status) string { return consolePath + "tasks?status=" + string(st) }
	f := []figure{
		{"due now (backlog)", capped(t.DueNow), link(delay.StatusPending), attention(t.DueNow, "warn")},
		{"oldest due for", roundDuration(t.Oldest), link(delay.StatusPending), ""},
		{"RUNNING past " + roundDuration(t.RunningTimeout), capped(t.StuckRunning), link(delay.StatusRunning), attention(t.StuckRunning, "bad")},
	}
	for _, st := range delay.Statuses {
		class := ""
		if st == delay.StatusFailed {
			class = attention(t.Counts[st], "bad")
		}
		f = append(f, figure{string(st), capped(t.Counts[st]), link(st), class})
	}
	return &card{"Delayed tasks", f}, nil
}

func (c *Console) fulfilmentCard(ctx context.Context, v *orderViews) (*card, error) {
	n, err := v.inspect.FulfilmentCounts(ctx)
	if err != nil {
		return nil, err
	}
	return &card{"Fulfilment overdue", []figure{
		{"flagged in the last day", capped(n.LastDay), consolePath + "fulfilment?since=24h", attention(n.LastDay, "warn")},
		{"flagged in all", capped(n.Total), consolePath + "fulfilment", ""},
	}}, nil
}

func (c *Console) closeRunCard(ctx context.Context, v *orderViews) (*card, error) {
	s, err := v.runs.Summary(ctx, time.Hour)
	if err != nil {
		return nil, err
	}
	runs := strconv.Itoa(s.Runs)
	if s.Capped {
		runs += "+"
	}
	return &card{"Close runs, last hour", []figure{
		{"runs", runs, consolePath + "runs", ""},
		{"failed", strconv.Itoa(s.Failed), consolePath + "runs", attention(s.Failed, "bad")},
		{"orders closed", strconv.Itoa(s.Closed), consolePath + "runs", ""},
		{"dead-lettered", strconv.Itoa(s.DeadLettered), consolePath + "dead-letters?status=waiting", attention(s.DeadLettered, "bad")},
		{"latest close after its deadline", roundDuration(s.MaxLateness), consolePath + "runs", ""},
	}}, nil
}

// query reads a list's query parameters, refusing any not in allowed (a
// typo must not silently list everything).
func query(r *http.Request, allowed ...string) (url.Values, error) {
	q := r.URL.Query()
	for k := range q {
		ok := false
		for _, a := range allowed {
			ok = ok || k == a
		}
		if !ok {
			return nil, invalidInput(k, "unknown filter %q (filters: %s)", k, strings.Join(allowed, ", "))
		}
	}
	return q, nil
}

// sinceParam reads a time-range bound: a database wall-clock time or a
// duration back from now.
func sinceParam(q url.Values, field string, now time.Time) (time.Time, error) {
	at, ago, err := deadletters.ParseTimeOrAgo(field, q.Get(field))
	if err != nil {
		return time.Time{}, err
	}
	if ago > 0 {
		return now.Add(-ago), nil
	}
	return at, nil
}

// listData is what every list page shows around its rows: the filters as
// given, and the links to the first and next pages.
type listData struct {
	Filter     url.Values
	Next       string // URL of the next page, "" at the end
	First      string // URL of the first page, "" on it
	Examined   int
	WindowFull bool
	Rows       any
	Bulk       bool // a bulk action is offered for these filters
	// Declared says the order tables are a declared shop schema
	// (order.schema.table), which some jobs do not work on.
	Declared bool
}

// renderList renders a list page, or the error reading its rows: d around
// the rows, with the links to the first and next pages of section pd.Nav
// under the filters d.Filter.
func (c *Console) renderList(w http.ResponseWriter, r *http.Request, op *session, err error, page string, pd pageData,
	d listData, next keyset.Cursor) {
	if err != nil {
		c.failErr(w, r, op, err)
		return
	}
	d.Next, d.First = pageLinks(consolePath+pd.Nav, d.Filter, next)
	pd.Data = d
	c.render(w, r, http.StatusOK, page, op, pd)
}

func pageLinks(base string, q url.Values, next keyset.Cursor) (nextURL, firstURL string) {
	f := url.Values{}
	for k, v := range q {
		if k != "after" && len(v) > 0 && v[0] != "" {
			f.Set(k, v[0])
		}
	}
	if q.Get("after") != "" {
		firstURL = base + "?" + f.Encode()
	}
	if !next.IsZero() {
		f.Set("after", next.String())
		nextURL = base + "?" + f.Encode()
	}
	return nextURL, firstURL
}

func (c *Console) deadLetterList(w http.ResponseWriter, r *http.Request, op *session) {
	q, v, err := c.sourcedQuery(r, "status", "stage", "since", "until", "error", "after")
	if err != nil {
		c.failErr(w, r, op, err)
		return
	}
	f := deadletters.Query{Status: strings.ToLower(q.Get("status")), Stage: q.Get("stage"), ErrorLike: q.Get("error")}
	now, err := v.inspect.Now(r.Context())
	if err == nil {
		f.Since, err = sinceParam(q, "since", now)
	}
	if err == nil {
		f.Until, err = sinceParam(q, "until", now)
	}
	if err == nil {
		f.After, err = oplist.ParseCursor(q.Get("after"))
	}
	var p deadletters.Page
	if err == nil {
		p, err = v.letters.Page(r.Context(), f)
	}
	c.renderList(w, r, op, err, "deadletters", pageData{Title: "Dead letters", Nav: "dead-letters", Sourced: true},
		listData{Filter: q, Examined: p.Examined, WindowFull: p.WindowFull, Rows: p.Letters,
			Bulk: (f.Status == deadletters.Parked || f.Status == deadletters.Waiting) && f.Until.IsZero()}, p.Next)
}

// deadLetterData is a dead letter's page: the letter and its order.
type deadLetterData struct {
	Letter *deadletters.Letter
	Order  *inspect.OrderDetail // nil when the order is gone
}

func (c *Console) deadLetterDetail(w http.ResponseWriter, r *http.Request, op *session) {
	v, id, dl, ok := deadLetterRows.lookup(c, w, r, op)
	if !ok {
		return
	}
	d := deadLetterData{Letter: dl}
	var err error
	if d.Order, err = v.inspect.OrderIn(r.Context(), dl.OrderNo, dl.OrderTable); err != nil && !errors.Is(err, orders.ErrOrderNotFound) {
		c.failErr(w, r, op, err)
		return
	}
	c.render(w, r, http.StatusOK, "deadletter", op, pageData{Title: "Dead letter " + strconv.FormatInt(id, 10), Nav: "dead-letters", Data: d})
}

// orderSearch is the order view's search form; with an order number it
// sends the browser to that order's page in the chosen source.
func (c *Console) orderSearch(w http.ResponseWriter, r *http.Request, op *session) {
	q, v, err := c.sourcedQuery(r, "orderNo")
	if err != nil {
		c.failErr(w, r, op, err)
		return
	}
	if no := strings.TrimSpace(q.Get("orderNo")); no != "" {
		http.Redirect(w, r, withSource(r, consolePath+"orders/"+url.PathEscape(no)), http.StatusSeeOther)
		return
	}
	c.render(w, r, http.StatusOK, "ordersearch", op, pageData{Title: "Find an order", Nav: "orders", Sourced: true,
		Data: tablesText(v.inspect.Tables())})
}

// tablesText names order tables for people: "the order table t_order",
// "the 16 order tables t_order_0 … t_order_15".
func tablesText(tables []string) string {
	if len(tables) == 1 {
		return "the order table " + tables[0]
	}
	return fmt.Sprintf("the %d order tables %s … %s", len(tables), tables[0], tables[len(tables)-1])
}

func (c *Console) orderDetail(w http.ResponseWriter, r *http.Request, op *session) {
	_, v, err := c.sourcedQuery(r)
	var d *inspect.OrderDetail
	if err == nil {
		d, err = v.inspect.Order(r.Context(), r.PathValue("orderNo"))
	}
	if err == nil {
		c.render(w, r, http.StatusOK, "order", op, pageData{Title: "Order " + d.OrderNo, Nav: "orders", Sourced: true, Data: d})
		return
	}
	if !errors.Is(err, orders.ErrOrderNotFound) || len(c.sources) == 0 {
		c.failLookup(w, r, op, err, inSource(r, "order "+r.PathValue("orderNo")))
		return
	}
	c.render(w, r, http.StatusNotFound, "noorder", op, pageData{Title: "No " + inSource(r, "order "+r.PathValue("orderNo")),
		Nav: "orders", Sourced: true, Data: c.orderElsewhere(r, v, r.PathValue("orderNo"))})
}

// noOrderData is the page of an order number not found in the chosen
// order database: where it looked, and the other order sources that hold
// the order (an operator with a number from a customer seldom knows its
// database).
type noOrderData struct {
	OrderNo string
	Looked  string    // the tables looked in (tablesText)
	Found   []orderAt // the other sources holding it
	Others  []string  // the other sources looked in
	Failed  []string  // the sources that could not be read (logged)
}

// orderAt is an order found in the order table Table of the source Source.
type orderAt struct{ Source, Table string }

// orderElsewhere looks orderNo up in the order sources other than the
// request's (one whose order tables are in, its view, was looked in
// already), one after the other.
func (c *Console) orderElsewhere(r *http.Request, in *orderViews, orderNo string) noOrderData {
	d := noOrderData{OrderNo: orderNo, Looked: tablesText(in.inspect.Tables())}
	for _, name := range c.sources {
		v := c.views.By[name]
		if v.inspect == in.inspect {
			continue
		}
		d.Others = append(d.Others, name)
		o, err := v.inspect.Order(r.Context(), orderNo)
		switch {
		case err == nil:
			d.Found = append(d.Found, orderAt{Source: name, Table: o.Table})
		case !errors.Is(err, orders.ErrOrderNotFound):
			c.log.ErrorContext(r.Context(), "console: look an order up in another source", "source", name, "order_no", orderNo, "err", err)
			d.Failed = append(d.Failed, name)
		}
	}
	return d
}

func (c *Console) flagList(w http.ResponseWriter, r *http.Request, op *session) {
	q, v, err := c.sourcedQuery(r, "since", "open", "after")
	if err != nil {
		c.failErr(w, r, op, err)
		return
	}
	var f inspect.FlagQuery
	switch q.Get("open") {
	case "", "0", "false":
	case "1", "true":
		f.Open = true
	default:
		c.failErr(w, r, op, invalidInput("open", "open %q is not true or false", q.Get("open")))
		return
	}
	now, err := v.inspect.Now(r.Context())
	if err == nil {
		f.Since, err = sinceParam(q, "since", now)
	}
	if err == nil {
		f.After, err = oplist.ParseCursor(q.Get("after"))
	}
	var p inspect.FlagPage
	if err == nil {
		p, err = v.inspect.FulfilmentFlags(r.Context(), f)
	}
	c.renderList(w, r, op, err, "flags", pageData{Title: "Fulfilment flags", Nav: "fulfilment", Sourced: true},
		listData{Filter: q, Examined: p.Examined, WindowFull: p.WindowFull, Rows: p.Flags, Declared: c.cfg.Schema.Declared}, p.Next)
}

func (c *Console) runList(w http.ResponseWriter, r *http.Request, op *session) {
	q, v, cur, err := c.sourcedListQuery(r, "after")
	var runs []inspect.CloseRun
	if err == nil {
		runs, err = v.runs.Recent(r.Context(), cur.ID, oplist.DefaultPageLimit+1)
	}
	var next keyset.Cursor
	if len(runs) > oplist.DefaultPageLimit {
		runs = runs[:oplist.DefaultPageLimit]
		next = keyset.Cursor{ID: runs[len(runs)-1].ID}
	}
	c.renderList(w, r, op, err, "runs", pageData{Title: "Close runs", Nav: "runs", Sourced: true},
		listData{Filter: q, Rows: runs, Examined: len(runs)}, next)
}

func (c *Console) taskList(w http.ResponseWriter, r *http.Request, op *session) {
	q, v, after, err := c.sourcedListQuery(r, "status", "handler", "bizUuid", "traceId", "after")
	var p delay.TaskPage
	if err == nil {
		p, err = v.tasks.Page(r.Context(), delay.TaskQuery{Status: delay.Status(strings.ToUpper(q.Get("status"))),
			Handler: q.Get("handler"), BizUUID: q.Get("bizUuid"), TraceID: q.Get("traceId"), After: after})
	}
	c.renderList(w, r, op, err, "tasks", pageData{Title: "Delayed tasks", Nav: "tasks", Sourced: true},
		listData{Filter: q, Examined: p.Examined, WindowFull: p.WindowFull, Rows: p.Tasks}, p.Next)
}

// task reads the task of the path's bizUuid in the request's source;
// false when it answered that it could not.
func (c *Console) task(w http.ResponseWriter, r *http.Request, op *session) (*orderViews, *delay.Task, bool) {
	biz := r.PathValue("bizUuid")
	return lookupIn(c, w, r, op, "delayed task with bizUuid "+biz, func(v *orderViews, ctx context.Context) (*delay.Task, error) {
		return v.tasks.Get(ctx, biz)
	})
}

func (c *Console) taskDetail(w http.ResponseWriter, r *http.Request, op *session) {
	_, t, ok := c.task(w, r, op)
	if !ok {
		return
	}
	c.render(w, r, http.StatusOK, "task", op, pageData{Title: "Task " + t.BizUUID, Nav: "tasks", Data: t})
}
