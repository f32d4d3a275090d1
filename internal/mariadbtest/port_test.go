package mariadbtest

import (
	"testing"
)

// Ports for private servers are never in the ephemeral range (where an
// outgoing connection may take one before the server binds it) and never
// handed out twice by one process.
func TestFreePortsAreDistinctAndBelowTheEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	for range 200 {
		p := freePort(t)
		if p < portLow || p >= portHigh {
			t.Fatalf("port %d outside [%d, %d)", p, portLow, portHigh)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
}
