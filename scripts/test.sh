#!/usr/bin/env bash
# The README's test command. Needs MariaDB and Redis answering (see README;
# .ci/run starts them). Runs formatting and vet checks, the whole test suite
# with the race detector, each fuzz target for a few seconds, the main-job
# demo and the benchmarks at a small size.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step "gofmt and go vet"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then echo "gofmt needed on: $unformatted" >&2; exit 1; fi
go vet ./...

step "go test -race ./..."
go test -race -count=1 -timeout 20m ./...

step "fuzz targets, ${FUZZTIME:-5s} each"
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
    echo "fuzz $pkg $target"
    go test -run='^$' -fuzz="^${target}\$" -fuzztime="${FUZZTIME:-5s}" "$pkg" >/dev/null
  done
done

step "main job end to end (README: make demo)"
DEMO_ORDERS=2000 ./scripts/demo.sh

step "benchmarks at a small size"
go run ./cmd/bench close -small
