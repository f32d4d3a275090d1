// Package faults holds the fault suite: real executor processes,
// built from this tree, against real MariaDB and Redis servers, with faults
// injected from outside — kill -9, server crashes and restarts, a Redis
// outage and flush, an unreachable admin, misconfigured shards, slow
// transactions past the lock expiry, a database clock days away from the
// executor's, hostile clients on both ports, a Redis master failed over
// by its Sentinels, and a shop's own schema over two databases with
// payments racing the close. After each scenario the
// order invariants are checked (internal/ordertest) and one line per
// scenario says what was checked: orders due, closed, compensated, doubled,
// lost. The last line is "N passed, M failed".
//
// Scenarios that stop or restart a server use their own private mariadbd
// (internal/mariadbtest) or redis-server (internal/redistest); the others use
// a database and a Redis key prefix of their own on the shared servers, which
// are never disturbed.
//
// The suite lives in the package's tests and runs only when asked:
//
//	go test ./internal/faults -run TestFaultSuite -count=1 -v -faults        # bounded (CI)
//	go test ./internal/faults -run TestFaultSuite -count=1 -v -faults.full -timeout 30m
//
// Without either flag TestFaultSuite skips and says how to run it, so a plain
// `go test ./...` stays quick. libfaketime (Debian package faketime) is
// needed for the clock scenario. See docs/faults.md for the scenarios
// and measured figures.
package faults
