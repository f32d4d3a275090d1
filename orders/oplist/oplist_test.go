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
