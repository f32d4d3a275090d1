package oplist

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
)

// Table is the reads an operator's list over one table shares with the
// others (dead letters, outbox events, payment conflicts): the search
// window, the rows of a page by primary key, and one order's rows. Its
// statements stay in the store.go of the package that owns the table.
type Table[T any] struct {
	// Noun names the rows in errors ("outbox events"), and One a row
	// ("outbox event").
	Noun, One string
	// GetSQL reads one row (Get); its one parameter is the row's key.
	GetSQL string
	// ListSQL reads a page of the list paged by id (List), with named
	// parameters.
	ListSQL string
	// WindowByIDSQL and WindowByStatusSQL are Window's statements (see
	// Window); "" where the list reads its windows itself.
	WindowByIDSQL, WindowByStatusSQL string
	// ByIDSQL reads listed rows (literal id list, sqlexec.SelectIDs).
	ByIDSQL string
	// OfOrderSQL reads one order's rows; its one parameter is the order
	// number.
	OfOrderSQL string
	// ID is a row's id, the key of the window.
	ID func(T) int64
}

// Get reads the row whose key is key: nil when there is none (as
// sqlexec.GetOne).
func (t Table[T]) Get(ctx context.Context, q sqlx.QueryerContext, key any) (*T, error) {
	r, err := sqlexec.GetOne[T](ctx, q, t.GetSQL, key)
	if err != nil {
		return nil, fmt.Errorf("read %s %v: %w", t.One, key, err)
	}
	return r, nil
}

// List reads a page of the list paged by id (the CLI's and the JSON API's),
// ListSQL with the named parameters p, whose limit is limit: the rows,
// empty rather than nil, and the before id of the next page (0 when this
// is the last).
func (t Table[T]) List(ctx context.Context, q sqlx.QueryerContext, p any, limit int) ([]T, int64, error) {
	rows := []T{}
	if err := sqlexec.SelectNamed(ctx, q, &rows, t.ListSQL, p); err != nil {
		return nil, 0, fmt.Errorf("list %s: %w", t.Noun, err)
	}
	var next int64
	if len(rows) == limit {
		next = t.ID(rows[len(rows)-1])
	}
	return rows, next, nil
}

// Picked is a page picked out of a search window and its rows.
type Picked[T any] struct {
	Rows []T
	// Next continues the list; zero when it has no more rows.
	Next Cursor
	// Examined is how many index entries the window held.
	Examined int
	// WindowFull is true when the page stopped at the search window before
	// it was full.
	WindowFull bool
}

// PageQuery is a page of a list as Table.Page reads it; the caller has
// checked Status and Filter.
type PageQuery[T any] struct {
	// Status is the list's status filter, "" for all (then newest id
	// first; with a status, over WindowByStatusSQL).
	Status string
	// Filter is the row filter of the search window (WindowParams.Filter),
	// "" for none.
	Filter string
	// OrderNo lists that order's rows that Keep passes (the filters checked
	// on each); the page is then the whole list.
	OrderNo string
	Keep    func(T) bool
	After   Cursor
	// Limit is the page size, 1-200 (CheckLimit). Default 50.
	Limit int
}

// Page checks q's order number and limit and reads its page: one order's
// rows, or a search window from q.After picked out as Pick does. The
// window holds q.Limit+1 entries, or SearchWindow with a row filter.
func (t Table[T]) Page(ctx context.Context, db sqlx.QueryerContext, q PageQuery[T]) (Picked[T], error) {
	var p Picked[T]
	if err := CheckOrderNo(q.OrderNo); err != nil {
		return p, err
	}
	if err := CheckLimit(&q.Limit); err != nil {
		return p, err
	}
	if q.OrderNo != "" {
		rows, err := t.OfOrder(ctx, db, q.OrderNo)
		for _, r := range rows {
			if q.Keep(r) {
				p.Rows = append(p.Rows, r)
			}
		}
		p.Examined = len(rows)
		return p, err
	}
	timed := q.Status != ""
	if err := CheckCursorKind(q.After, timed); err != nil {
		return p, err
	}
	window := q.Limit + 1
	if q.Filter != "" {
		window = SearchWindow
	}
	keys, err := Window(ctx, db, t.WindowByIDSQL, t.WindowByStatusSQL, q.After,
		WindowParams{Filter: q.Filter, Status: q.Status, Window: window})
	if err != nil {
		return p, fmt.Errorf("list %s: %w", t.Noun, err)
	}
	return t.Pick(ctx, db, keys, q.Limit, window, timed)
}

// Pick picks a page of limit rows out of keys, a search window of window
// entries (PickWindow), and reads them by primary key, in the window's
// order.
func (t Table[T]) Pick(ctx context.Context, q sqlx.QueryerContext, keys []WindowKey, limit, window int, timed bool) (Picked[T], error) {
	var p Picked[T]
	var ids []int64
	ids, p.Next, p.Examined, p.WindowFull = PickWindow(keys, limit, window, timed)
	rows, err := sqlexec.SelectIDs[T](ctx, q, t.ByIDSQL, ids)
	if err != nil {
		return p, fmt.Errorf("read %d %s: %w", len(ids), t.Noun, err)
	}
	InOrder(rows, ids, t.ID)
	p.Rows = rows
	return p, nil
}

// OfOrder reads the rows of the order orderNo, in OfOrderSQL's order:
// empty rather than nil when it has none.
func (t Table[T]) OfOrder(ctx context.Context, q sqlx.QueryerContext, orderNo string) ([]T, error) {
	rows := []T{}
	if err := sqlx.SelectContext(ctx, q, &rows, t.OfOrderSQL, orderNo); err != nil {
		return nil, fmt.Errorf("read %s of %s: %w", t.Noun, orderNo, err)
	}
	return rows, nil
}
