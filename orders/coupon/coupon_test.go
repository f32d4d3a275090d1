package coupon

import (
	"database/sql"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/orders/closesql"
)

// cp is a copy row: order id, then the copy's id.
func cp(order, copyID int64) row { return row{ID: order, Copy: copyID} }

// assign gives the orders of one match key distinct copies, lowest id
// first in ascending order id; an order finding every copy taken gets none.
func TestAssign(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		rows          []row // as the lock returns them: by order id, copies in any order
		copies, match map[int64]int64
	}{
		{"one order, the lowest copy", []row{cp(1, 12), cp(1, 10), cp(1, 11)},
			map[int64]int64{1: 10}, map[int64]int64{1: 3}},
		{"orders sharing a key get distinct copies", []row{cp(1, 11), cp(1, 10), cp(2, 10), cp(2, 11)},
			map[int64]int64{1: 10, 2: 11}, map[int64]int64{1: 2, 2: 2}},
		{"fewer copies than orders: the last goes without", []row{cp(1, 11), cp(1, 10), cp(2, 11), cp(2, 10), cp(3, 10), cp(3, 11)},
			map[int64]int64{1: 10, 2: 11}, map[int64]int64{1: 2, 2: 2, 3: 2}},
		{"an order skips a taken copy for its next", []row{cp(1, 10), cp(2, 12), cp(2, 10)},
			map[int64]int64{1: 10, 2: 12}, map[int64]int64{1: 1, 2: 2}},
		{"keys of their own", []row{cp(1, 20), cp(2, 10)},
			map[int64]int64{1: 20, 2: 10}, map[int64]int64{1: 1, 2: 1}},
		{"no rows", nil, map[int64]int64{}, map[int64]int64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := append([]row(nil), tc.rows...)
			copies, matched := assign(tc.rows)
			require.Equal(t, tc.copies, copies, "copies")
			require.Equal(t, tc.match, matched, "matched")
			require.Equal(t, in, tc.rows, "the locked rows are left as they came")
		})
	}
}

// matchedOnce counts per order: a page's total can be right while one
// order matches two rows and another none.
func TestMatchedOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		ids      []int64
		rows     []row
		optional bool
		once     []int64
		ok       bool
	}{
		{"one row each", []int64{1, 2, 3}, []row{{ID: 1}, {ID: 2}, {ID: 3}}, false, []int64{1, 2, 3}, true},
		{"two and none add up to the total", []int64{1, 2, 3}, []row{{ID: 1}, {ID: 2}, {ID: 2}}, false, nil, false},
		{"one short", []int64{1, 2}, []row{{ID: 1}}, false, nil, false},
		{"two rows of one order", []int64{1}, []row{{ID: 1}, {ID: 1}}, false, nil, false},
		{"no orders", nil, nil, false, []int64{}, true},
		{"optional: none is no coupon", []int64{1, 2, 3}, []row{{ID: 2}}, true, []int64{2}, true},
		{"optional: no order has one", []int64{1, 2}, nil, true, []int64{}, true},
		{"optional: two and none still wrong", []int64{1, 2, 3}, []row{{ID: 1}, {ID: 2}, {ID: 2}}, true, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			once, ok := matchedOnce(tc.ids, tc.rows, tc.optional)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.once, once)
		})
	}
}

// check judges each order from the locked rows, with the reasons the
// dead letters carry.
func TestCheck(t *testing.T) {
	t.Parallel()
	byID := &closesql.Coupon{Used: "1", OrderNo: true, Table: "user_coupon"}
	byMatch := &closesql.Coupon{ByMatch: true, Used: "1", Table: "t_coupon_history"}
	optional := &closesql.Coupon{ByMatch: true, Optional: true, Used: "1", Table: "t_coupon_history"}
	used := func(id int64, no string) row {
		return row{ID: id, Status: "1", OrderNo: sql.NullString{String: no, Valid: no != ""}}
	}
	orders := []Order{{No: "A", Key: 1}, {No: "B", Key: 2}, {No: "C", Key: 3}, {No: "D", Key: 4}, {No: "E", Key: 5}}
	for _, tc := range []struct {
		name string
		st   *closesql.Coupon
		rows []row
		want []Verdict
	}{
		{"by id", byID, []row{used(1, "A"), {ID: 2, Status: "0"}, used(3, "X"), used(4, "")},
			[]Verdict{{}, {Reason: `coupon 2 is status 0 for order "", not locked by this order`},
				{Reason: `coupon 3 is status 1 for order "X", not locked by this order`},
				{Reason: `coupon 4 is status 1 for order "", not locked by this order`},
				{Reason: "coupon 5 is missing"}}},
		{"by id, the coupon names no order", &closesql.Coupon{Used: "1"}, []row{used(1, ""), used(2, "X"), used(3, "C"), used(4, "D"), used(5, "E")},
			[]Verdict{{}, {}, {}, {}, {}}},
		{"by match", byMatch, []row{{ID: 1}, {ID: 2}, {ID: 2}, {ID: 4}, {ID: 5}},
			[]Verdict{{}, {Reason: "2 used rows of t_coupon_history match the order, not one"},
				{Reason: "0 used rows of t_coupon_history match the order, not one"}, {}, {}}},
		{"by match, optional", optional, []row{{ID: 1}, {ID: 2}, {ID: 2}, {ID: 4}, {ID: 5}},
			[]Verdict{{}, {Reason: "2 used rows of t_coupon_history match the order, not one"}, {Drop: true}, {}, {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, check(tc.st, orders, tc.rows))
		})
	}
}

// checkCopies sets aside (or, optional, takes the coupon from) an order
// left without a copy, saying whether it matched none or found each taken.
func TestCheckCopies(t *testing.T) {
	t.Parallel()
	st := &closesql.Coupon{ByMatch: true, AnyCopy: true, Used: "1", Table: "h"}
	orders := []Order{{No: "A", Key: 1}, {No: "B", Key: 2}, {No: "C", Key: 3}, {No: "D", Key: 4}}
	rows := []row{cp(1, 11), cp(1, 10), cp(2, 10), cp(2, 11), cp(3, 11), cp(3, 10)} // D matches none
	require.Equal(t, []Verdict{{}, {},
		{Reason: "2 used rows of h match the order, each taken by an order before it in this close"},
		{Reason: "0 used rows of h match the order"}}, checkCopies(st, orders, rows))

	opt := *st
	opt.Optional = true
	require.Equal(t, []Verdict{{}, {}, {Drop: true}, {Drop: true}}, checkCopies(&opt, orders, rows))
}

func TestKeysAndCopyIDs(t *testing.T) {
	t.Parallel()
	require.Equal(t, []int64{1, 3, 7}, keys([]Order{{Key: 7}, {Key: 1}, {Key: 3}, {Key: 1}}))
	require.Equal(t, []int64{10, 11, 20}, copyIDs(map[int64]int64{3: 20, 1: 10, 2: 11}))
}
