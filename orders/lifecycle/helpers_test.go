package lifecycle_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/paytest"
	"github.com/orderjob/executor/orders"
)

// testBundle is paytest's bundle: the tests' worlds hold closed orders as
// well, closed the way the executor closes them.
type testBundle struct{ *paytest.Bundle }

func setup(t *testing.T) *testBundle {
	t.Helper()
	return &testBundle{paytest.Setup(t)}
}

// run runs the bundle's closer and fails the test on an error.
func (b *testBundle) run(t *testing.T, opt orders.RunOptions) {
	t.Helper()
	_, err := b.Closer.Run(b.Ctx, opt)
	require.NoError(t, err)
}
