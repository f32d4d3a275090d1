#!/usr/bin/env bash
# The README's test command (`make test`), the contributor's full check:
# about 15 minutes on 2 cores.
#
# It first checks every prerequisite (nothing slow runs before): Go, the
# Debian packages the steps and the tests use (installed with apt-get when
# missing and run as root; otherwise it stops with the one command to run),
# and MariaDB, Redis and RabbitMQ answering at TEST_MYSQL_DSN,
# TEST_REDIS_ADDR and TEST_RABBITMQ_URL (docs/development.md#tests-and-ci;
# .ci/run starts them). Then: formatting and vet, the documentation's links,
# the alerting rules' promtool checks and tests, docker-compose.yml with each
# profile, golangci-lint, the release build, the whole test suite with the race detector
# (make demo among it: internal/doclinks runs scripts/demo.sh), each fuzz
# target for a few seconds, the bounded fault suite and the benchmarks at a
# small size.
#
#   scripts/test.sh                   everything
#   scripts/test.sh --check-prereqs   only the prerequisites (installing what it may)
#   scripts/test.sh --list-prereqs    the commands it needs and their Debian packages
#
# TEST_SH_NOT_ROOT=1 makes it act as a user who may not install packages.
set -euo pipefail
cd "$(dirname "$0")/.."
# mariadbd and rabbitmqctl live in sbin, which a user's PATH may lack.
export PATH="$PATH:/usr/sbin:/sbin"

step() { printf '\n== %s\n' "$*"; }
fatal() { echo "FATAL: $*" >&2; exit 1; }

# prereqs: a command the run needs, and the Debian package that has it.
# The Galera tests also need galera-4's provider, a dependency of
# mariadb-server, and rsync for the joiners' state transfer.
prereqs() {
  cat <<'LIST'
make make
promtool prometheus
faketime faketime
chromium chromium
docker-compose docker-compose
mariadbd mariadb-server
mariadb-install-db mariadb-server
rsync rsync
redis-server redis-server
redis-cli redis-tools
rabbitmqctl rabbitmq-server
LIST
}

# missing prints "commands|packages": the commands not on PATH and their
# packages (each once), space-separated.
missing() {
  local cmd pkg cmds="" pkgs=""
  while read -r cmd pkg; do
    if [ "$cmd" = chromium ] && [ -n "${CHROMIUM:-}" ] && [ -x "$CHROMIUM" ]; then continue; fi
    command -v "$cmd" >/dev/null 2>&1 && continue
    cmds="$cmds $cmd"
    case " $pkgs " in *" $pkg "*) ;; *) pkgs="$pkgs $pkg" ;; esac
  done < <(prereqs)
  echo "${cmds# }|${pkgs# }"
}

check_tools() {
  command -v go >/dev/null 2>&1 || fatal "go is not on PATH: install Go 1.26 or later and put its bin directory on PATH (docs/development.md#tests-and-ci)"
  local v
  v=$(go env GOVERSION)
  if ! awk -v v="${v#go}" 'BEGIN { split(v, p, "."); exit !(p[1] > 1 || (p[1] == 1 && p[2] >= 26)) }'; then
    fatal "$v is too old: install Go 1.26 or later (go.mod says go 1.26)"
  fi
  local m cmds pkgs install log
  m=$(missing)
  cmds=${m%%|*} pkgs=${m#*|}
  [ -z "$cmds" ] && return 0
  install="apt-get install -y --no-install-recommends $pkgs"
  if [ "$(id -u)" != 0 ] || [ -n "${TEST_SH_NOT_ROOT:-}" ]; then
    fatal "missing ${cmds// /, }; as a user this script does not install packages: run  sudo $install  then make test again"
  fi
  command -v apt-get >/dev/null 2>&1 ||
    fatal "missing ${cmds// /, } and no apt-get here: install the Debian packages $pkgs (or their equivalents), then make test again"
  echo "installing the Debian packages $pkgs (for ${cmds// /, })"
  log=$(mktemp)
  # Another apt (an unattended upgrade, a second install) holding dpkg's
  # lock is waited for, up to 10 min, instead of failing at once.
  local apt="apt-get -o DPkg::Lock::Timeout=600"
  # shellcheck disable=SC2086 # the packages are words
  if ! DEBIAN_FRONTEND=noninteractive $apt install -y -q --no-install-recommends $pkgs >"$log" 2>&1; then
    # shellcheck disable=SC2086
    { DEBIAN_FRONTEND=noninteractive $apt update -q && DEBIAN_FRONTEND=noninteractive $apt install -y -q --no-install-recommends $pkgs; } >>"$log" 2>&1 ||
      fatal "$install failed (its output: $log): run it yourself and mend what it says, then make test again"
  fi
  rm -f "$log"
  m=$(missing)
  [ -z "${m%%|*}" ] || fatal "still missing ${m%%|*} after $install: install them by hand, then make test again"
}

# answers host port: does something accept TCP connections there?
answers() { timeout 3 bash -c 'exec 3<>"/dev/tcp/$1/$2"' _ "$1" "$2" 2>/dev/null; }

# hostport default-port text: host and port of "host:port" or "[v6]:port".
hostport() {
  local hp=$1 host port
  case "$hp" in
    \[*) host=${hp%%]*} host=${host#[} port=${hp##*]} port=${port#:} ;;
    *:*) host=${hp%:*} port=${hp##*:} ;;
    *) host=$hp port="" ;;
  esac
  echo "${host:-127.0.0.1} ${port:-$2}"
}

check_services() {
  local dsn=${TEST_MYSQL_DSN:-root@tcp(127.0.0.1:3306)/}
  local redis=${TEST_REDIS_ADDR:-127.0.0.1:6379}
  local amqp=${TEST_RABBITMQ_URL:-amqp://guest:guest@127.0.0.1:5672/}
  local down=() h p
  if [[ "$dsn" == *"tcp("*")"* ]]; then
    h=${dsn#*tcp(} h=${h%%)*}
    read -r h p < <(hostport "$h" 3306)
    answers "$h" "$p" || down+=("MariaDB at $h:$p (TEST_MYSQL_DSN; start it: systemctl start mariadb)")
  fi
  read -r h p < <(hostport "$redis" 6379)
  answers "$h" "$p" || down+=("Redis at $h:$p (TEST_REDIS_ADDR; start it: systemctl start redis-server)")
  h=${amqp#*://} h=${h##*@} h=${h%%/*}
  read -r h p < <(hostport "$h" 5672)
  local rabbit_up=1
  answers "$h" "$p" || { rabbit_up=0; down+=("RabbitMQ at $h:$p (TEST_RABBITMQ_URL; start it: systemctl start rabbitmq-server)"); }
  if [ ${#down[@]} -gt 0 ]; then
    local msg
    msg=$(printf '%s; ' "${down[@]}")
    fatal "not answering: ${msg%; }; without systemd, bash .ci/run starts the local ones, then runs make test"
  fi
  # Quorum queues and at-least-once dead-lettering need RabbitMQ 3.10+; a
  # broker rabbitmqctl cannot ask (on another host) is taken as it is.
  local v
  if [ "$rabbit_up" = 1 ] && v=$(timeout 30 rabbitmqctl -q eval 'rabbit_misc:version().' 2>/dev/null | tr -d '"') &&
    [[ "$v" =~ ^[0-9]+\.[0-9]+ ]]; then
    awk -v v="$v" 'BEGIN { split(v, p, "."); exit !(p[1] > 3 || (p[1] == 3 && p[2] >= 10)) }' ||
      fatal "RabbitMQ $v at $h:$p is too old: the tests need 3.10 or later (quorum queues)"
  fi
}

case "${1:-}" in
  --list-prereqs) prereqs; exit 0 ;;
  --check-prereqs | "") ;;
  *) echo "usage: scripts/test.sh [--check-prereqs | --list-prereqs]" >&2; exit 2 ;;
esac

step "prerequisites (commands, Debian packages, services)"
check_tools
check_services
echo "prerequisites: ok"
[ "${1:-}" = --check-prereqs ] && exit 0

# Two Go modules: the application (.) and xxljob (its own module for other
# teams, standard library only in its core; see docs/xxljob.md). Each is
# vetted and tested on its own go.mod.
modules=". xxljob"

step "gofmt and go vet"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then echo "gofmt needed on: $unformatted" >&2; exit 1; fi
for m in $modules; do (cd "$m" && go vet ./...); done

# golangci-lint is pinned in tools/go.mod (a module of its own, so the
# application's go.mod carries none of its dependencies). `go tool` builds
# it once into the Go build cache (a few minutes on 2 cores) and the linter
# keeps its results in its own cache, so a second run takes about a minute.
step "golangci-lint (.golangci.yml), each module"
lint_mod="$PWD/tools/go.mod"
for m in $modules; do (cd "$m" && go tool -modfile="$lint_mod" golangci-lint run ./...); done

step "documentation links (README.md, docs/)"
# -short: the README's commands (this script's prerequisite check, make
# demo) are tested with the rest below.
go test -count=1 -short ./internal/doclinks

step "Prometheus rules and config (promtool)"
promtool check rules deploy/prometheus/alerts.yml
promtool check config deploy/prometheus/prometheus.yml
promtool test rules deploy/prometheus/alerts_test.yml

step "docker-compose.yml, each profile (validated offline with compose v1)"
make -s compose-config

step "release build (the Dockerfile's flags)"
make -s build

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
if ! go test ./internal/faults -run TestFaultSuite -count=1 -v -faults -timeout 15m >"$faults_log" 2>&1; then
  cat "$faults_log"; rm -f "$faults_log"; exit 1
fi
grep -E '^(PASS |FAIL |fault suite|[0-9]+ passed, [0-9]+ failed)' "$faults_log"; rm -f "$faults_log"

step "benchmarks at a small size"
go run ./cmd/bench close -small -dsn "${TEST_MYSQL_DSN:-root@tcp(127.0.0.1:3306)/}" -redis "${TEST_REDIS_ADDR:-127.0.0.1:6379}"
