package faults_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// report is what a scenario prints: filled in as it goes, so a scenario that
// fails half-way still says what it had checked.
type report struct {
	mu     sync.Mutex
	ran    bool
	parts  []string
	ledger *ledger // the orders' final figures (summed over a scenario's databases)
}

// final records a database's final figures.
func (r *report) final(l ledger) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ledger == nil {
		r.ledger = &ledger{}
	}
	r.ledger.Due += l.Due
	r.ledger.Closed += l.Closed
	r.ledger.Compensated += l.Compensated
	r.ledger.Doubled += l.Doubled
	r.ledger.Lost += l.Lost
	r.ledger.Early += l.Early
	r.ledger.DeadLetters += l.DeadLetters
	r.ledger.Violations = append(r.ledger.Violations, l.Violations...)
}

func (r *report) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.parts = append(r.parts, fmt.Sprintf(format, args...))
}

func (r *report) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	head := "due=? closed=? compensated=? doubled=? lost=? (not reached)"
	if r.ledger != nil {
		head = r.ledger.String()
	}
	return head + " | " + strings.Join(r.parts, "; ")
}

type scenario struct {
	name string
	run  func(t *testing.T, h *harness, r *report)
}

var scenarios = []scenario{
	{"1-kill9", scenarioKill9},
	{"2-mariadb-restart", scenarioMariaDBRestart},
	{"3-redis-outage", scenarioRedisOutage},
	{"4-admin-down-restart", scenarioAdminDown},
	{"5-shards", scenarioShards},
	{"6-slow-tx", scenarioSlowTx},
	{"7-clock-skew", scenarioClockSkew},
	{"8-hostile-ports", scenarioHostilePorts},
	{"9-kill9-report", scenarioKill9Report},
	{"10-galera", scenarioGalera},
	{"11-sentinel", scenarioSentinel},
	{"12-primary-failover", scenarioPrimaryFailover},
	{"13-galera-multi", scenarioGaleraMulti},
	{"14-redis-cluster", scenarioRedisCluster},
	{"15-sentinel-delay", scenarioSentinelDelay},
	{"16-shop-shards", scenarioShopShards},
}

// TestFaultSuite runs every scenario in order and prints one line per
// scenario and a last line "N passed, M failed". It runs only with -faults
// (bounded) or -faults.full; see doc.go.
func TestFaultSuite(t *testing.T) {
	var p profile
	switch {
	case *flagFull:
		p = full
	case *flagBounded:
		p = bounded
	default:
		t.Skip("fault suite not requested: run `go test ./internal/faults -run TestFaultSuite -count=1 -v -faults` (bounded) or `-faults.full`")
	}
	start := time.Now()
	h := newHarness(t, p)
	passed, failed := 0, 0
	for _, sc := range scenarios {
		r := &report{}
		began := time.Now()
		ok := t.Run(sc.name, func(t *testing.T) {
			r.ran = true
			sc.run(t, h, r)
		})
		if !r.ran {
			continue // filtered out by -run
		}
		status := "PASS"
		if ok {
			passed++
		} else {
			status = "FAIL"
			failed++
		}
		fmt.Printf("%s %-21s %s (%.1fs)\n", status, sc.name, r, time.Since(began).Seconds())
	}
	fmt.Printf("fault suite (%s) took %.1fs\n", p.name, time.Since(start).Seconds())
	fmt.Printf("%d passed, %d failed\n", passed, failed)
}
