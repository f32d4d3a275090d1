package app

import (
	"fmt"
	"log/slog"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/orders/outbox"
)

// sourceRelay is the outbox relay of one order database, named by the
// order source whose database it delivers.
type sourceRelay struct {
	// Source is the order source's name (order.sources), or "default" for
	// mysql.dsn's database when no source is on it.
	Source string
	Relay  *outbox.Relay // built, not started: serve starts it
}

// newRelays builds, in outbox mode, one relay per database a close writes
// events in: mysql.dsn's first (the delayed-task closes, and every close
// without order.sources), then each order source's that is not on a
// database already served, on the source's own pool (dbs: one per source,
// in order.sources' order, as OpenUnits returns them). Each relay claims
// its database's events with SKIP LOCKED as a single relay does, so a
// source that does not answer fails its own relay's passes and no other's.
// Local mode has none.
func newRelays(cfg *config.Config, home *sqlx.DB, dbs []*sqlx.DB, logger *slog.Logger) ([]sourceRelay, error) {
	if cfg.Order.Compensation.Mode != "outbox" {
		return nil, nil
	}
	sdbs, err := sourceDBs(cfg, home, dbs)
	if err != nil {
		return nil, err
	}
	name := homeName(sdbs)
	r, err := newRelay(home, cfg, relayLogger(cfg, logger, name))
	if err != nil {
		return nil, err
	}
	relays := []sourceRelay{{Source: name, Relay: r}}
	for _, s := range otherDatabases(sdbs) {
		r, err := newRelay(s.db, cfg, relayLogger(cfg, logger, s.name))
		if err != nil {
			return nil, fmt.Errorf("order source %s: %w", s.name, err)
		}
		relays = append(relays, sourceRelay{Source: s.name, Relay: r})
	}
	return relays, nil
}

// relayLogger tags a relay's lines with its source when there are several;
// without order.sources the lines stay as they were.
func relayLogger(cfg *config.Config, logger *slog.Logger, source string) *slog.Logger {
	if len(cfg.Order.Sources) == 0 {
		return logger
	}
	return logger.With("source", source)
}

// newRelay builds the relay of db from order.compensation and outbox.
func newRelay(db *sqlx.DB, cfg *config.Config, logger *slog.Logger) (*outbox.Relay, error) {
	c := cfg.Order.Compensation
	r, err := outbox.NewRelay(db, outbox.RelayConfig{
		Endpoints: map[string]string{
			outbox.EventStockRelease:  c.InventoryURL,
			outbox.EventCouponRestore: c.CouponURL,
		},
		Token:       c.Token,
		TokenHeader: c.TokenHeader,
		MaxAttempts: cfg.Outbox.MaxAttempts,
		Logger:      logger,
	})
	if err != nil {
		return nil, fmt.Errorf("order.compensation: %w", err)
	}
	return r, nil
}

// relayComponentName is how serve's log names the relay of source: as
// before when it is the only one.
func relayComponentName(relays []sourceRelay, source string) string {
	if len(relays) == 1 {
		return "outbox relay"
	}
	return "outbox relay " + source
}
