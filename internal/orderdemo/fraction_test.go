package orderdemo_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/orderdemo"
)

// Fractions that add up to one leave exactly nothing, whatever the
// floating-point rounding of their difference (1 - 0.9 - 0.1 is -2.8e-17);
// a sum truly above one stays negative.
func TestRemainder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		fractions []float64
		want      float64
	}{
		{[]float64{0.9, 0.1}, 0},
		{[]float64{0.7, 0.2, 0.1}, 0},
		{[]float64{0.1, 0.2, 0.7}, 0},
		{[]float64{0.3, 0.3, 0.3, 0.1}, 0},
		{[]float64{0.6, 0.4}, 0},
		{[]float64{1}, 0},
		{[]float64{0.8, 0.1}, 1 - 0.8 - 0.1},
		{[]float64{}, 1},
		{[]float64{0.9, 0.2}, 1 - 0.9 - 0.2},
		{[]float64{0.5, 0.5 + 1e-6}, -1e-6},
	} {
		t.Run(fmt.Sprint(tc.fractions), func(t *testing.T) {
			got := orderdemo.Remainder(tc.fractions...)
			require.InDelta(t, tc.want, got, 1e-12)
			require.Equal(t, tc.want < 0, got < 0)
			if tc.want == 0 {
				require.Zero(t, got, "exactly zero, not a rounding residue")
			}
		})
	}
}

// Generate takes shares that add up to one (with the remainder as the
// not-due share) and refuses a share out of range, naming it.
func TestGenerateFractionsAddingUpToOne(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct{ due, paid float64 }{{0.9, 0.1}, {0.7, 0.3}, {0.2, 0.8}} {
		res, err := orderdemo.Generate(b.ctx, b.db.DB, orderdemo.Spec{Orders: 100, SKUs: 10, Reset: true,
			DueFraction: tc.due, PaidFraction: tc.paid, NotDueFraction: orderdemo.Remainder(tc.due, tc.paid)})
		require.NoError(t, err, "due %v paid %v", tc.due, tc.paid)
		require.Zero(t, res.NotDue, "due %v paid %v", tc.due, tc.paid)
		require.Equal(t, 100, res.Due+res.Paid)
	}
	for _, tc := range []struct {
		spec orderdemo.Spec
		want string
	}{
		{orderdemo.Spec{Orders: 10, DueFraction: 0.5, NotDueFraction: -0.01}, "demo not-due fraction -0.01 out of [0, 1]"},
		{orderdemo.Spec{Orders: 10, DueFraction: 0.5, CouponFraction: 1.5}, "demo coupon fraction 1.5 out of [0, 1]"},
		{orderdemo.Spec{Orders: 10, DueFraction: 0.9, PaidFraction: 0.2}, "demo fractions add up to 1.1, above 1"},
		{orderdemo.Spec{Orders: 10, DueFraction: math.NaN()}, "demo due fraction NaN out of [0, 1]"},
		{orderdemo.Spec{Orders: 10, DueFraction: 0.5, CouponFraction: math.NaN()}, "demo coupon fraction NaN out of [0, 1]"},
	} {
		_, err := orderdemo.Generate(b.ctx, b.db.DB, tc.spec)
		require.EqualError(t, err, tc.want)
	}
}
