package doclinks

import (
	"testing"

	"github.com/orderjob/executor/internal/redistest"
)

func TestMain(m *testing.M) { redistest.VerifyTestMain(m) }
