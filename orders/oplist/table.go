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
	// Noun names the rows in errors ("outbox events").
	Noun string
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

// Page reads the search window from after (Window over the table's two
// statements) and picks a page of limit rows out of it (Pick). window is the
// window's size, limit+1 when no row filter is set; timed says whether the
// list's cursor carries the time column.
func (t Table[T]) Page(ctx context.Context, q sqlx.QueryerContext, after Cursor, p WindowParams, limit, window int, timed bool) (Picked[T], error) {
	p.Window = window
	keys, err := Window(ctx, q, t.WindowByIDSQL, t.WindowByStatusSQL, after, p)
	if err != nil {
		return Picked[T]{}, fmt.Errorf("list %s: %w", t.Noun, err)
	}
	return t.Pick(ctx, q, keys, limit, window, timed)
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
