package lifecycle_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/orders/lifecycle"
)

// New refuses bad settings with a message naming the setting and its
// value, without connecting (the handle points where nothing listens).
func TestNewRefusals(t *testing.T) {
	t.Parallel()
	db := dbtest.Unconnected(t)
	jobs := func(cfg lifecycle.Config) error { _, err := lifecycle.New(db, cfg); return err }
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"no database", func() error { _, err := lifecycle.New(nil, lifecycle.Config{}); return err }(), "lifecycle: New needs a database"},
		{"auto-confirm days", jobs(lifecycle.Config{AutoConfirmDays: -3}), "lifecycle: auto-confirm days -3 out of [1, 3650]"},
		{"fulfilment days", jobs(lifecycle.Config{FulfillmentTimeoutDays: 4000}), "lifecycle: fulfillment timeout days 4000 out of [1, 3650]"},
		{"page size", jobs(lifecycle.Config{PageSize: 9999}), "lifecycle: page size 9999 out of [1, 5000]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.EqualError(t, tc.err, tc.want)
		})
	}
	require.NoError(t, jobs(lifecycle.Config{}), "the defaults are valid")
}
