package refunds

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/orders/oplist"
)

// Refund statuses (payment_conflict.refund_status).
const (
	// Owed: the payment is to be paid back.
	Owed = "owed"
	// Done: an operator recorded that it was paid back.
	Done = "refunded"
)

// ErrNotFound: no payment conflict has that payment id.
var ErrNotFound = errors.New("orders: no payment conflict with that payment id")

// ErrDone: the refund was already recorded.
var ErrDone = errors.New("orders: the refund was already recorded")

// Conflict is one row of payment_conflict: a payment that could not be
// taken. Times are the database session's wall clock (see deadletters.Letter).
type Conflict struct {
	ID        int64  `db:"id"`
	PaymentID string `db:"payment_id"`
	OrderNo   string `db:"order_no"`
	// Amount is what was paid, a decimal in the currency's main unit.
	Amount string `db:"pay_amount"`
	// Reason is "late" (the order had been closed) or "duplicate" (it had
	// been paid with another payment).
	Reason  string `db:"reason"`
	Channel string `db:"channel"`
	// RefundStatus is Owed or Done; RefundedAt and RefundNote are set
	// with Done.
	RefundStatus string     `db:"refund_status"`
	RefundedAt   *time.Time `db:"refunded_at"`
	RefundNote   string     `db:"refund_note"`
	// RefundedBy says who recorded the refund.
	RefundedBy string    `db:"refunded_by"`
	PaidAt     time.Time `db:"paid_at"`
	CreatedAt  time.Time `db:"created_at"`
}

type conflictJSON struct {
	ID           int64  `json:"id"`
	PaymentID    string `json:"paymentId"`
	OrderNo      string `json:"orderNo"`
	Amount       string `json:"amount"`
	Reason       string `json:"reason"`
	Channel      string `json:"channel"`
	RefundStatus string `json:"refundStatus"`
	RefundedAt   string `json:"refundedAt,omitempty"`
	RefundNote   string `json:"refundNote"`
	RefundedBy   string `json:"refundedBy"`
	PaidAt       string `json:"paidAt"`
	CreatedAt    string `json:"createdAt"`
}

// MarshalJSON renders the conflict with camelCase keys and zone-less times.
func (p Conflict) MarshalJSON() ([]byte, error) {
	j := conflictJSON{ID: p.ID, PaymentID: p.PaymentID, OrderNo: p.OrderNo, Amount: p.Amount, Reason: p.Reason,
		Channel: p.Channel, RefundStatus: p.RefundStatus, RefundNote: p.RefundNote, RefundedBy: p.RefundedBy,
		PaidAt: p.PaidAt.Format(oplist.WallTimeLayout), CreatedAt: p.CreatedAt.Format(oplist.WallTimeLayout)}
	if p.RefundedAt != nil {
		j.RefundedAt = p.RefundedAt.Format(oplist.WallTimeLayout)
	}
	return json.Marshal(j)
}

// Filter selects payment conflicts to list.
type Filter struct {
	// Status: Owed, Done, or "" for all.
	Status string
	// OrderNo: only this order's; "" for all.
	OrderNo string
	// Limit is the most rows returned, 1-1000. Default 50.
	Limit int
	// BeforeID pages: only rows with a smaller id (0: from the newest).
	BeforeID int64
}

// Listing is a page of payment conflicts, newest first, and the BeforeID
// of the next page (0 when this is the last).
type Listing struct {
	Conflicts  []Conflict `json:"conflicts"`
	NextBefore int64      `json:"nextBefore"`
}

// Summary sums up what is owed.
type Summary struct {
	// Count is the payments owed back; Amount their sum (a decimal, in the
	// currency's main unit: conflicts of several currencies add up
	// meaninglessly, so a shop with several keeps amounts apart itself).
	Count  int    `json:"count"`
	Amount string `json:"amount"`
	// Oldest is when the oldest owed payment was recorded (session wall
	// clock), and OldestAge how long ago; zero when nothing is owed.
	Oldest    *time.Time    `json:"-"`
	OldestAge time.Duration `json:"-"`
	// Total is every conflict recorded, refunded or not.
	Total int `json:"total"`
}

type summaryJSON struct {
	Count            int     `json:"count"`
	Amount           string  `json:"amount"`
	Oldest           string  `json:"oldest,omitempty"`
	OldestAgeSeconds float64 `json:"oldestAgeSeconds"`
	Total            int     `json:"total"`
}

// MarshalJSON renders the summary with a zone-less time and the age in
// seconds.
func (r Summary) MarshalJSON() ([]byte, error) {
	j := summaryJSON{Count: r.Count, Amount: r.Amount, OldestAgeSeconds: r.OldestAge.Seconds(), Total: r.Total}
	if r.Oldest != nil {
		j.Oldest = r.Oldest.Format(oplist.WallTimeLayout)
	}
	return json.Marshal(j)
}

// Ops is the operators' view of the refunds owed: list, sum up, record a
// refund. It needs only the database, and is safe for concurrent use.
type Ops struct {
	db    *sqlx.DB
	store store
}

// New returns the view over db.
func New(db *sqlx.DB) *Ops { return &Ops{db: db} }

// List returns payment conflicts newest first, with the next page's
// BeforeID.
func (r *Ops) List(ctx context.Context, f Filter) (Listing, error) {
	if err := oplist.CheckStatus(f.Status, Owed, Done); err != nil {
		return Listing{}, err
	}
	if err := oplist.CheckOrderNo(f.OrderNo); err != nil {
		return Listing{}, err
	}
	if err := oplist.CheckPage(&f.Limit, f.BeforeID); err != nil {
		return Listing{}, err
	}
	rows, next, err := conflictList.List(ctx, r.db, map[string]any{
		"status": f.Status, "order_no": f.OrderNo, "before_id": f.BeforeID, "limit": f.Limit}, f.Limit)
	if err != nil {
		return Listing{}, err
	}
	return Listing{Conflicts: rows, NextBefore: next}, nil
}

// Owed sums up the refunds owed.
func (r *Ops) Owed(ctx context.Context) (Summary, error) {
	return r.store.refundsOwed(ctx, r.db)
}

// Get returns the conflict of a payment, or ErrNotFound.
func (r *Ops) Get(ctx context.Context, paymentID string) (*Conflict, error) {
	// Not the payment side's payment id check: rows written before payment
	// ids carry "legacy:" + an order number, which may hold any character.
	if paymentID == "" || len(paymentID) > 512 {
		return nil, oplist.Invalid("paymentId", "payment id must be 1-128 characters")
	}
	p, err := conflictList.Get(ctx, r.db, paymentID)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, ErrNotFound
	}
	return p, nil
}

// MarkRefunded records that the payment was paid back, by whom (the
// operator's name, 1-64 bytes) and when (the database clock), with a note
// (e.g. the payment side's refund id, at most 255 bytes), and returns the
// row. A refund recorded before returns the row with ErrDone. The CLI, the
// API and the console all record refunds through it.
func (r *Ops) MarkRefunded(ctx context.Context, paymentID, note, by string) (*Conflict, error) {
	if len(note) > 255 {
		return nil, oplist.Invalid("note", "note is %d bytes, at most 255", len(note))
	}
	if by == "" || len(by) > 64 {
		return nil, oplist.Invalid("by", "who recorded the refund must be 1-64 bytes")
	}
	if err := oplist.CheckUTF8("note", note); err != nil {
		return nil, err
	}
	if err := oplist.CheckUTF8("by", by); err != nil {
		return nil, err
	}
	if _, err := r.Get(ctx, paymentID); err != nil {
		return nil, err
	}
	done, err := r.store.markRefunded(ctx, r.db, paymentID, note, by)
	if err != nil {
		return nil, err
	}
	p, err := r.Get(ctx, paymentID)
	if err != nil {
		return nil, err
	}
	if !done {
		return p, ErrDone
	}
	return p, nil
}

// OfOrder returns one order's conflicts, newest first (the order view's).
func OfOrder(ctx context.Context, q sqlx.QueryerContext, orderNo string) ([]Conflict, error) {
	return conflictList.OfOrder(ctx, q, orderNo)
}
