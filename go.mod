module github.com/orderjob/executor

go 1.26.0

require (
	github.com/chromedp/chromedp v0.23.0
	github.com/go-redsync/redsync/v4 v4.18.1
	github.com/go-sql-driver/mysql v1.10.1
	github.com/jmoiron/sqlx v1.4.0
	github.com/magiconair/properties v1.18.13
	github.com/orderjob/executor/xxljob v0.0.0-00010101000000-000000000000
	github.com/prometheus/client_golang v1.25.0
	github.com/rabbitmq/amqp091-go v1.16.0
	github.com/redis/go-redis/v9 v9.23.0
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	go.yaml.in/yaml/v3 v3.0.5
	golang.org/x/sync v0.25.0
	golang.org/x/sys v0.48.0
	golang.org/x/term v0.37.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/chromedp/cdproto v0.159.0 // indirect
	github.com/go-json-experiment/json v0.0.0-20260213210345-44df1a37e875 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace github.com/orderjob/executor/xxljob => ./xxljob
