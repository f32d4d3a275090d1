package orders_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/orders"
)

// The refunds view: what is owed (count, sum, oldest), the list, and a
// refund recorded once; the same over HTTP.
func TestRefundsOwedView(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.shop(t)
	for _, no := range []string{"R-1", "R-2"} {
		b.place(t, no, false, orders.Item{SKUID: 1, Quantity: 1})
	}
	_, err := b.db.ExecContext(b.ctx, `UPDATE order_info SET pay_amount = 20.00`)
	require.NoError(t, err)
	_, err = b.newCloser(t, orders.CloserConfig{NowOffset: 31 * time.Minute}).CloseOrders(b.ctx, []string{"R-1"})
	require.NoError(t, err)
	for _, p := range []struct {
		no string
		n  orders.Notice
	}{
		{"R-2", orders.Notice{PaymentID: "wx-a", Amount: "20.00"}},  // pays R-2
		{"R-2", orders.Notice{PaymentID: "ali-b", Amount: "20.00"}}, // duplicate
		{"R-1", orders.Notice{PaymentID: "wx-c", Amount: "20.00"}},  // late
		{"R-1", orders.Notice{PaymentID: "unp-d", Amount: "19.50"}}, // late, another channel
	} {
		_, err := b.svc.PayWith(b.ctx, p.no, p.n)
		require.NoError(t, err)
	}
	r := orders.NewRefunds(b.db.DB)
	o, err := r.Owed(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 3, o.Count)
	require.Equal(t, "59.50", o.Amount)
	require.NotNil(t, o.Oldest)
	require.Equal(t, 3, o.Total)

	l, err := r.List(b.ctx, orders.RefundFilter{OrderNo: "R-1"})
	require.NoError(t, err)
	require.Len(t, l.Conflicts, 2)
	require.Equal(t, "unp-d", l.Conflicts[0].PaymentID, "newest first")

	p, err := r.MarkRefunded(b.ctx, "wx-c", "refund 9001")
	require.NoError(t, err)
	require.Equal(t, orders.RefundDone, p.RefundStatus)
	require.Equal(t, "refund 9001", p.RefundNote)
	require.NotNil(t, p.RefundedAt)
	_, err = r.MarkRefunded(b.ctx, "wx-c", "again")
	require.ErrorIs(t, err, orders.ErrRefundDone)
	_, err = r.MarkRefunded(b.ctx, "nope", "")
	require.ErrorIs(t, err, orders.ErrRefundNotFound)
	o, err = r.Owed(b.ctx)
	require.NoError(t, err)
	require.Equal(t, 2, o.Count)
	require.Equal(t, "39.50", o.Amount)
	require.Equal(t, 3, o.Total)

	srv := httptest.NewServer(orders.NewRefundAPI(r, nil).Handler())
	t.Cleanup(srv.Close)
	call := func(method, path, body string, want int, v any) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, bytes.NewBufferString(body))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, want, resp.StatusCode, path)
		if v != nil {
			require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
		}
	}
	var summary struct {
		Count            int     `json:"count"`
		Amount           string  `json:"amount"`
		OldestAgeSeconds float64 `json:"oldestAgeSeconds"`
	}
	call("GET", "/api/refunds/summary", "", 200, &summary)
	require.Equal(t, 2, summary.Count)
	require.Equal(t, "39.50", summary.Amount)
	var list struct {
		Conflicts []struct {
			PaymentID    string `json:"paymentId"`
			Reason       string `json:"reason"`
			RefundStatus string `json:"refundStatus"`
		} `json:"conflicts"`
	}
	call("GET", "/api/refunds?status=owed", "", 200, &list)
	require.Len(t, list.Conflicts, 2)
	call("POST", "/api/refunds/ali-b/refunded", `{"note":"refund 9002"}`, 200, nil)
	call("POST", "/api/refunds/ali-b/refunded", `{}`, 409, nil)
	call("POST", "/api/refunds/zzz/refunded", ``, 404, nil)
	call("POST", "/api/refunds/unp-d/refunded", `{"colour":"blue"}`, 400, nil)
	call("GET", "/api/refunds?status=lost", "", 400, nil)
	call("GET", "/api/refunds/unp-d", "", 200, nil)
}
