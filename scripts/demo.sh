#!/usr/bin/env bash
# The main job end to end against the local MariaDB and Redis: create the
# schema, load demo orders (most of them past their deadline), then run
# orderTimeoutCloseJob once and print its run log.
#
# It works in a database of its own, DEMO_DATABASE (default order_job_demo,
# created if missing), on the server and as the user of MYSQL_DSN (default
# root on 127.0.0.1:3306): never in the database MYSQL_DSN names, so a DSN
# left pointing at a real shop is never reset.
set -euo pipefail
cd "$(dirname "$0")/.."
dsn="${MYSQL_DSN:-root@tcp(127.0.0.1:3306)/}"
# go-sql-driver's rule: the database is what follows the last '/', up to '?'.
tail="${dsn##*/}"
params=""
if [[ "$tail" == *"?"* ]]; then params="?${tail#*\?}"; fi
export MYSQL_DSN="${dsn%/*}/${DEMO_DATABASE:-order_job_demo}${params}"
# The process log (JSON lines for a log collector by default) stays out of
# the run log printed below: only warnings and errors, as text, on stderr.
export LOG_LEVEL="${LOG_LEVEL:-warn}" LOG_FORMAT="${LOG_FORMAT:-text}"
echo "demo database: ${DEMO_DATABASE:-order_job_demo}"
echo "building bin/executor (the first build takes a few minutes)…"
go build -o bin/executor ./cmd/executor
# migrate prints every statement it runs: to a file, and its last line here.
mkdir -p logs
migrate_log=logs/demo-migrate.log
if ! ./bin/executor migrate -create-database >"$migrate_log" 2>&1; then
  cat "$migrate_log" >&2
  echo "FATAL: executor migrate failed (output above, also in $migrate_log)" >&2
  exit 1
fi
echo "schema: $(tail -n 1 "$migrate_log") (every statement: $migrate_log)"
./bin/executor demo-data -orders "${DEMO_ORDERS:-5000}" -skus 200 -due 0.8 -coupons 0.3 -reset
echo "running orderTimeoutCloseJob once; its run log:"
./bin/executor run orderTimeoutCloseJob
