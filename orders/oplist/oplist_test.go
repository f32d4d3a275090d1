package oplist

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckStatus(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status string
		want   string // "" for no error
	}{
		{"", ""},
		{"parked", ""},
		{"done", ""},
		{"Parked", `status "Parked" is not pending, parked or done`},
		{"x", `status "x" is not pending, parked or done`},
	} {
		err := CheckStatus(tc.status, "pending", "parked", "done")
		if tc.want == "" {
			if err != nil {
				t.Errorf("CheckStatus(%q) = %v, want nil", tc.status, err)
			}
			continue
		}
		var inv *InvalidInputError
		if !errors.As(err, &inv) || inv.Field != "status" || inv.Msg != tc.want {
			t.Errorf("CheckStatus(%q) = %v, want status: %s", tc.status, err, tc.want)
		}
	}
	if err := CheckStatus("x", "owed", "refunded"); err == nil || err.Error() != `status "x" is not owed or refunded` {
		t.Errorf("two statuses: %v", err)
	}
}

func TestCheckOrderNo(t *testing.T) {
	t.Parallel()
	if err := CheckOrderNo(strings.Repeat("a", MaxOrderNoLen)); err != nil {
		t.Errorf("%d bytes: %v", MaxOrderNoLen, err)
	}
	err := CheckOrderNo(strings.Repeat("a", MaxOrderNoLen+1))
	var inv *InvalidInputError
	if !errors.As(err, &inv) || inv.Field != "orderNo" || inv.Msg != "order number must be at most 64 bytes" {
		t.Errorf("%d bytes: %v", MaxOrderNoLen+1, err)
	}
}

func TestPickRows(t *testing.T) {
	t.Parallel()
	type row struct {
		id  int64
		hit bool
	}
	rows := []row{{9, true}, {8, false}, {7, true}, {6, true}}
	key := func(r row) WindowKey { return WindowKey{ID: r.id, Hit: r.hit} }
	picked, next, examined, full := PickRows(rows, 2, 4, false, key)
	if len(picked) != 2 || picked[0].id != 9 || picked[1].id != 7 || next.ID != 7 || examined != 4 || full {
		t.Errorf("limit 2: %v next %v examined %d full %v", picked, next, examined, full)
	}
	// The window ends before the page is full: the next page starts after
	// the window's last key.
	picked, next, _, full = PickRows(rows[:2], 2, 2, false, key)
	if len(picked) != 1 || next.ID != 8 || !full {
		t.Errorf("window full: %v next %v full %v", picked, next, full)
	}
	ids, next, _, _ := PickWindow([]WindowKey{{ID: 3, Hit: true}}, 2, 3, false)
	if len(ids) != 1 || ids[0] != 3 || !next.IsZero() {
		t.Errorf("PickWindow: %v next %v", ids, next)
	}
}
