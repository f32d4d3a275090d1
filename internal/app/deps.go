package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
	"golang.org/x/term"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/logctx"
)

// NewLogger builds the process logger on w in the configured format (see
// LogFormat). Lines written under a run's or a delayed task's context carry
// its job_id and log_id, or its trace_id (logctx).
func NewLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	lvl, _ := config.ParseLevel(cfg.Log.Level) // validated by Load
	opts := &slog.HandlerOptions{Level: lvl, ReplaceAttr: durationText}
	if LogFormat(cfg, w) == "text" {
		return slog.New(logctx.NewHandler(slog.NewTextHandler(w, opts)))
	}
	return slog.New(logctx.NewHandler(slog.NewJSONHandler(w, opts)))
}

// LogFormat is the format the process log takes on w: log.format, where
// auto means text when w is a terminal (a person reads it) and JSON
// otherwise (a collector does).
func LogFormat(cfg *config.Config, w io.Writer) string {
	if cfg.Log.Format != "auto" {
		return cfg.Log.Format
	}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return "text"
	}
	return "json"
}

// durationText writes durations as Go duration text ("1.5s"), not as
// nanoseconds, so a reader needs no unit and no arithmetic.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// LogNotices logs what the configuration says about itself (keys of a Java
// executor that work differently here).
func LogNotices(logger *slog.Logger, cfg *config.Config) {
	for _, n := range cfg.Notices() {
		logger.Log(context.Background(), n.Level, n.Msg)
	}
}

// OpenDB opens and pings MySQL with the executor's DSN settings.
func OpenDB(ctx context.Context, cfg *config.Config) (*sqlx.DB, error) {
	return openDB(ctx, cfg, pingTimeout)
}

// openDB is OpenDB waiting at most wait for the server's first answer.
func openDB(ctx context.Context, cfg *config.Config, wait time.Duration) (*sqlx.DB, error) {
	db, err := openPool(cfg.MySQL)
	if err != nil {
		return nil, err
	}
	if err := pingOrClose(ctx, db, wait); err != nil {
		if errors.Is(err, ErrNoAnswer) {
			return nil, fmt.Errorf("mysql: %s: %w", serverAddr(cfg.MySQL), err)
		}
		return nil, fmt.Errorf("mysql: ping: %w", zoneHint(err, cfg.MySQL.TimeZone))
	}
	return db, nil
}

// serverAddr is the address the DSN of m dials, for an error that has to
// say which server did not answer.
func serverAddr(m config.MySQL) string {
	if mc, err := m.DriverConfig(); err == nil && mc.Addr != "" {
		return mc.Net + " " + mc.Addr
	}
	return "the DSN's server"
}

// erUnknownTimeZone is ER_UNKNOWN_TIME_ZONE: the session's time_zone,
// mysql.timeZone, names a zone the server does not know.
const erUnknownTimeZone = 1298

// zoneHint says what to do when the server refuses mysql.timeZone, zone:
// every connection sets it, so the first one fails with the server's bare
// "Unknown or incorrect time zone". Other errors are returned as they are.
func zoneHint(err error, zone string) error {
	var me *mysql.MySQLError
	if zone == "" || !errors.As(err, &me) || me.Number != erUnknownTimeZone {
		return err
	}
	return fmt.Errorf("mysql.timeZone %s: the server knows no zone of that name (it has no time-zone tables, "+
		"or the name is wrong): set an offset such as '+08:00', or load the server's zone tables "+
		"(mariadb-tzinfo-to-sql /usr/share/zoneinfo | mariadb mysql); see docs/time-zones.md: %w", zone, err)
}

// pingTimeout bounds the wait for the database's first answer.
const pingTimeout = 10 * time.Second

// ErrNoAnswer is PingOrClose's error when the server took the connection
// (or let the dial hang) and never answered within pingTimeout: a
// firewall that drops packets, a wrong port, a stuck server. The driver
// says only "context deadline exceeded" or "invalid connection" then.
var ErrNoAnswer = errors.New("no answer")

// PingOrClose checks that db answers within pingTimeout, and closes it
// when it does not, so a caller giving up on it leaks no pool.
func PingOrClose(ctx context.Context, db *sqlx.DB) error { return pingOrClose(ctx, db, pingTimeout) }

func pingOrClose(ctx context.Context, db *sqlx.DB, wait time.Duration) error {
	pctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		db.Close()
		if pctx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("%w within %s: check that the server is up and that the DSN's address and port "+
				"are the server's [%w]", ErrNoAnswer, wait, err)
		}
		return err
	}
	return nil
}

// openPool makes the pool of m's DSN and limits, without connecting.
func openPool(m config.MySQL) (*sqlx.DB, error) {
	dsn, err := m.NormalizedDSN()
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	db, err := sqlx.Open("mysql", dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql: open: %w", err)
	}
	db.SetMaxOpenConns(m.MaxOpenConns)
	db.SetMaxIdleConns(m.MaxOpenConns)
	db.SetConnMaxLifetime(m.ConnMaxLifetime)
	db.SetConnMaxIdleTime(m.ConnMaxIdleTime)
	return db, nil
}

// NewRedis builds the universal client for the configured mode, with the
// Sentinels' credentials and TLS (redis.tls) on every connection.
func NewRedis(cfg config.Redis) (redis.UniversalClient, error) {
	tlsConf, err := cfg.TLS.Config()
	if err != nil {
		return nil, err
	}
	opt := &redis.UniversalOptions{
		Addrs:            cfg.Addr,
		Username:         cfg.Username,
		Password:         cfg.Password,
		SentinelUsername: cfg.SentinelUsername,
		SentinelPassword: cfg.SentinelPassword,
		DB:               cfg.DB,
		MasterName:       cfg.MasterName,
		TLSConfig:        tlsConf,
		DialTimeout:      2 * time.Second,
		ReadTimeout:      2 * time.Second,
		WriteTimeout:     2 * time.Second,
	}
	switch cfg.Mode {
	case "single":
		if len(cfg.Addr) != 1 {
			return nil, errors.New("redis: single mode takes exactly one address")
		}
		return redis.NewClient(opt.Simple()), nil
	case "sentinel":
		return redis.NewFailoverClient(opt.Failover()), nil
	case "cluster":
		return newClusterClient(opt), nil
	default: // auto: the universal client's own rule, with our cluster settings
		if opt.MasterName == "" && len(opt.Addrs) > 1 {
			return newClusterClient(opt), nil
		}
		return redis.NewUniversalClient(opt), nil
	}
}

// clusterReload is how often the cluster client reads the slot map again.
// go-redis reloads it at once on a MOVED answer, but not when a master
// stops answering: with its default of a minute, every command for the
// slots of a killed master failed for that long after its replica had
// taken over (2 s on loopback, test TestClusterClientFollowsAFailover).
const clusterReload = time.Second

// newClusterClient is the Redis Cluster client: the slot map read again
// every clusterReload, and one dial per attempt (the default five, 100 ms
// apart, only delay the retry on another node when a master is dead).
func newClusterClient(opt *redis.UniversalOptions) *redis.ClusterClient {
	co := opt.Cluster()
	co.ClusterStateReloadInterval = clusterReload
	co.DialerRetries = 1
	return redis.NewClusterClient(co)
}

// CheckRedisDB refuses at start a redis.db the server does not have, which
// otherwise leaves the executor never ready: every connection's SELECT
// fails. The server's `databases` setting is known only here; CONFIG GET,
// which managed Redis may refuse, only words the message. A server that
// does not answer is not refused: readiness reports it.
func CheckRedisDB(ctx context.Context, cfg config.Redis, rdb redis.UniversalClient) error {
	if cfg.DB == 0 {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := rdb.Ping(pctx).Err()
	var answer redis.Error
	if err == nil || !errors.As(err, &answer) {
		return nil
	}
	// The server answered with an error: was it the SELECT? Ask database 0.
	c := cfg
	c.DB = 0
	zero, zerr := NewRedis(c)
	if zerr != nil {
		return nil
	}
	defer zero.Close()
	if zero.Ping(pctx).Err() != nil {
		return nil // not the database number (a password, say): readiness says so
	}
	have := ""
	if kv, cerr := zero.ConfigGet(pctx, "databases").Result(); cerr == nil {
		if n, aerr := strconv.Atoi(kv["databases"]); aerr == nil {
			have = fmt.Sprintf(" (it has %d databases, 0 to %d)", n, n-1)
		}
	}
	return fmt.Errorf("redis.db: %d: the server refused to select it%s: %v", cfg.DB, have, err)
}

// newLockNodes builds one client per independent lock node (Redlock), with
// TLS as configured.
func newLockNodes(cfg config.Redis) ([]redis.UniversalClient, error) {
	tlsConf, err := cfg.TLS.Config()
	if err != nil {
		return nil, err
	}
	var nodes []redis.UniversalClient
	for _, a := range cfg.LockNodes {
		nodes = append(nodes, redis.NewClient(&redis.Options{
			Addr: strings.TrimSpace(a), Username: cfg.Username, Password: cfg.Password, TLSConfig: tlsConf,
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		}))
	}
	return nodes, nil
}

// lockQuorumCheck is the readiness check of the Redlock nodes: it pings
// every node at once and fails when fewer than a majority answer, as
// taking an order lock then fails (every order would be skipped as
// locked). Its error says how many answered and which did not.
func lockQuorumCheck(nodes []redis.UniversalClient) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		errs := make([]error, len(nodes))
		var wg sync.WaitGroup
		for i, n := range nodes {
			wg.Go(func() {
				if err := n.Ping(ctx).Err(); err != nil {
					name := fmt.Sprint("#", i+1)
					if c, ok := n.(*redis.Client); ok {
						name = c.Options().Addr
					}
					errs[i] = fmt.Errorf("lock node %s: %w", name, err)
				}
			})
		}
		wg.Wait()
		down := errors.Join(errs...)
		failed := 0
		for _, err := range errs {
			if err != nil {
				failed++
			}
		}
		need := len(nodes)/2 + 1
		if answered := len(nodes) - failed; answered < need {
			return fmt.Errorf("lock quorum lost: %d of %d lock nodes answer, %d needed: %w", answered, len(nodes), need, down)
		}
		return nil
	}
}
