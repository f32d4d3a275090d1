#!/usr/bin/env bash
# The README's test command (`make test`). Needs MariaDB, Redis and RabbitMQ
# answering (TEST_MYSQL_DSN, TEST_REDIS_ADDR, TEST_RABBITMQ_URL;
# docs/development.md; .ci/run starts them).
# Runs formatting and vet checks, the documentation's links, the alerting
# rules' promtool checks and tests, the whole test suite with the race
# detector, each fuzz target for a few seconds, the
# main-job demo and the benchmarks at a small size.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step "tools"
# libfaketime: the fault suite runs a private mariadbd with its clock shifted.
if ! command -v faketime >/dev/null 2>&1; then
  echo "installing Debian's faketime"
  apt-get install -y -q faketime >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q faketime >/dev/null; }
fi
command -v faketime >/dev/null || { echo "FATAL: faketime is needed (apt-get install faketime)" >&2; exit 1; }
# chromium: the console's browser test drives Debian's chromium headless.
if ! command -v chromium >/dev/null 2>&1; then
  echo "installing Debian's chromium"
  apt-get install -y -q --no-install-recommends chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends chromium >/dev/null; }
fi
command -v chromium >/dev/null || { echo "FATAL: chromium is needed (apt-get install chromium)" >&2; exit 1; }

# Two Go modules: the application (.) and xxljob (its own module for other
# teams, standard library only in its core; see docs/xxljob.md). Each is
# vetted and tested on its own go.mod.
modules=". xxljob"

step "gofmt and go vet"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then echo "gofmt needed on: $unformatted" >&2; exit 1; fi
for m in $modules; do (cd "$m" && go vet ./...); done

step "documentation links (README.md, docs/)"
go test -count=1 ./internal/doclinks

step "Prometheus rules and config (promtool)"
# Debian's prometheus package carries promtool; .ci/run installs it.
command -v promtool >/dev/null || { echo "FATAL: promtool is needed (apt-get install prometheus)" >&2; exit 1; }
promtool check rules deploy/prometheus/alerts.yml
promtool check config deploy/prometheus/prometheus.yml
promtool test rules deploy/prometheus/alerts_test.yml

step "go test -race ./... (each module)"
for m in $modules; do (cd "$m" && go test -race -count=1 -timeout 20m ./...); done

# fuzz_one fuzzes one target. Go 1.26's fuzz coordinator can end a run at
# the -fuzztime boundary with a bare "context deadline exceeded" and no input
# (golang/go#75804, fixed in Go 1.27): such a run, with no failing input
# written and no panic, is run once more; any other failure, or a second one,
# fails the step.
fuzz_one() { # module package target
  local out try
  for try in 1 2; do
    if out=$(cd "$1" && go test -run='^$' -fuzz="^${3}\$" -fuzztime="${FUZZTIME:-5s}" "$2" 2>&1); then
      return 0
    fi
    if [ "$try" = 1 ] && grep -q 'context deadline exceeded' <<<"$out" &&
      ! grep -qE 'Failing input written|panic:|_test\.go:[0-9]+:' <<<"$out"; then
      echo "$out" | tail -3
      echo "fuzz $2 $3: ended at the -fuzztime boundary with no failing input (golang/go#75804); running it again"
      continue
    fi
    echo "$out"
    return 1
  done
}

step "fuzz targets, ${FUZZTIME:-5s} each"
for m in $modules; do
  for pkg in $(cd "$m" && go list ./...); do
    dir=$(cd "$m" && go list -f '{{.Dir}}' "$pkg")
    for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
      echo "fuzz $pkg $target"
      fuzz_one "$m" "$pkg" "$target" || exit 1
    done
  done
done

step "fault suite, bounded (the full one: docs/faults.md)"
faults_log=$(mktemp)
if ! go test ./internal/faults -run TestFaultSuite -count=1 -v -faults -timeout 10m >"$faults_log" 2>&1; then
  cat "$faults_log"; rm -f "$faults_log"; exit 1
fi
grep -E '^(PASS |FAIL |fault suite|[0-9]+ passed, [0-9]+ failed)' "$faults_log"; rm -f "$faults_log"

step "main job end to end (README: make demo)"
DEMO_ORDERS=2000 ./scripts/demo.sh

step "benchmarks at a small size"
go run ./cmd/bench close -small -dsn "${TEST_MYSQL_DSN:-root@tcp(127.0.0.1:3306)/}" -redis "${TEST_REDIS_ADDR:-127.0.0.1:6379}"
