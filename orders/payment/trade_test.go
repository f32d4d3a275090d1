package payment_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
)

func TestHTTPTradeCloserContract(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := ordertest.NewPaySide(t, "s3cret")
	tc := paytest.TradeCloser(t, p, 2)
	for _, c := range []struct {
		answer string
		want   orders.TradeResult
		err    string
		calls  int
	}{
		{"closed", orders.TradeClosed, "", 1},
		{"already_paid", orders.TradeAlreadyPaid, "", 1},
		{"not_found", orders.TradeNotFound, "", 1},
		{"flaky", orders.TradeClosed, "", 2},
		{"fail", 0, "status 500", 3},
		{"slow", 0, "deadline exceeded", 3},
		{"garbage", 0, `unknown result "maybe"`, 1},
		{"404", 0, "status 404", 1},
	} {
		t.Run(c.answer, func(t *testing.T) {
			t.Parallel()
			no := "T-" + c.answer
			p.Set(no, c.answer)
			got, err := tc.CloseTrade(ctx, no)
			if c.err != "" {
				require.ErrorContains(t, err, c.err)
				require.ErrorContains(t, err, no, "the error names the order")
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, c.want, got)
			require.Equal(t, c.calls, p.CallsOf(no), "attempts")
		})
	}
	t.Cleanup(func() {
		bad, _ := p.Counters()
		require.Zero(t, bad, "every call carried the token")
	})
}
