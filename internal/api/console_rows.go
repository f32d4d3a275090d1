package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/orderjob/executor/orders/deadletters"
	"github.com/orderjob/executor/orders/outbox"
)

// rowKind is a kind of row of an order source that the console shows at
// section/{id}.
type rowKind[T any] struct {
	what    string // as in "outbox event 12"
	section string
	read    func(v *orderViews, ctx context.Context, id int64) (*T, error)
}

var (
	outboxEvents = rowKind[outbox.Event]{what: "outbox event", section: "outbox",
		read: func(v *orderViews, ctx context.Context, id int64) (*outbox.Event, error) {
			return v.outbox.Get(ctx, id)
		}}
	deadLetterRows = rowKind[deadletters.Letter]{what: "dead letter", section: "dead-letters",
		read: func(v *orderViews, ctx context.Context, id int64) (*deadletters.Letter, error) {
			return v.letters.GetByID(ctx, id)
		}}
)

// lookup reads the row of the path's id in the request's source; false
// when it answered that it could not.
func (k rowKind[T]) lookup(c *Console, w http.ResponseWriter, r *http.Request, op *session) (*orderViews, int64, *T, bool) {
	id, err := pathID(r, "id")
	if err != nil {
		c.failErr(w, r, op, err)
		return nil, 0, nil, false
	}
	v, row, ok := lookupIn(c, w, r, op, fmt.Sprintf("%s %d", k.what, id), func(v *orderViews, ctx context.Context) (*T, error) {
		return k.read(v, ctx, id)
	})
	return v, id, row, ok
}

// lookupIn reads what (e.g. "payment p-1") with read in the views of the
// request's source; false when it answered that it could not.
func lookupIn[T any](c *Console, w http.ResponseWriter, r *http.Request, op *session, what string,
	read func(v *orderViews, ctx context.Context) (*T, error)) (*orderViews, *T, bool) {
	v, err := c.viewsOf(r)
	var row *T
	if err == nil {
		row, err = read(v, r.Context())
	}
	if err != nil {
		c.failLookup(w, r, op, err, inSource(r, what))
		return nil, nil, false
	}
	return v, row, true
}

// page is the console page of row id, in the request's source.
func (k rowKind[T]) page(r *http.Request, id int64) string {
	return withSource(r, fmt.Sprintf("%s%s/%d", consolePath, k.section, id))
}
