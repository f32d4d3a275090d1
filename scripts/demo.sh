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
echo "demo database: ${DEMO_DATABASE:-order_job_demo}"
go build -o bin/executor ./cmd/executor
./bin/executor migrate -create-database
./bin/executor demo-data -orders "${DEMO_ORDERS:-5000}" -skus 200 -due 0.8 -coupons 0.3 -reset
./bin/executor run orderTimeoutCloseJob
