#!/usr/bin/env bash
# The main job end to end against the local MariaDB and Redis: create the
# schema, load demo orders (most of them past their deadline), then run
# orderTimeoutCloseJob once and print its run log.
set -euo pipefail
cd "$(dirname "$0")/.."
go build -o bin/executor ./cmd/executor
./bin/executor migrate
./bin/executor demo-data -orders "${DEMO_ORDERS:-5000}" -skus 200 -due 0.8 -coupons 0.3 -reset
./bin/executor run orderTimeoutCloseJob
