package orders_test

import (
	"testing"

	"github.com/orderjob/executor/internal/redistest"
)

// The tests stop a private Redis on purpose.
func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }
