package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/orders"
	"github.com/orderjob/executor/orders/schema"
	"github.com/orderjob/executor/sql/migrations"
)

// MigrationsConfig is what migrate, its status and the start-up check
// share of the configuration for mysql.dsn's database: the history table
// and the shop's declared schema (order.schema), whose stock and coupon
// tables are not this database's business when the outbox gives them
// back. When an order source (order.sources) is on mysql.dsn's database,
// as sharded-orders.md advises, the shop's tables checked there are that
// source's first order table's (Config.OrderTables names it alone; the
// source's own check covers the rest): a sharded shop has t_order_0 ...,
// no table named order.schema.table itself.
func MigrationsConfig(cfg *config.Config) (migrations.Config, error) {
	mcfg, err := migrationsConfig(cfg)
	if err != nil || !mcfg.Shop.Declared || len(cfg.Order.Sources) == 0 {
		return mcfg, err
	}
	sources, err := cfg.Sources()
	if err != nil {
		return mcfg, err
	}
	for _, src := range sources {
		if cfg.OnHomeDatabase(src) {
			mcfg.OrderTables = src.Tables[:1]
			return mcfg, nil
		}
	}
	return mcfg, nil
}

// migrationsConfig is MigrationsConfig of a database holding
// order.schema's tables under their declared names.
func migrationsConfig(cfg *config.Config) (migrations.Config, error) {
	sch, err := cfg.Order.Schema.Schema()
	if err != nil {
		return migrations.Config{}, fmt.Errorf("order.schema: %w", err)
	}
	mode, err := orders.ParseCompensationMode(cfg.Order.Compensation.Mode)
	if err != nil {
		return migrations.Config{}, err
	}
	return migrations.Config{Table: cfg.MySQL.MigrationsTable, Shop: sch, GivebacksByEvents: mode == orders.CompensateOutbox}, nil
}

// SourceMigrationsConfig is MigrationsConfig for the database of order
// source src: with a declared schema the shop's tables checked there are
// those of its first order table, and, with tables, Check and Status also
// verify every order table the source lists (Config.OrderTables, which
// the migrator turns the first one's way itself).
func SourceMigrationsConfig(cfg *config.Config, src config.Source, tables bool) (migrations.Config, error) {
	mcfg, err := migrationsConfig(cfg)
	if err != nil {
		return mcfg, err
	}
	if tables {
		mcfg.OrderTables = src.Tables
		return mcfg, nil
	}
	if mcfg.Shop.Declared {
		if mcfg.Shop, err = mcfg.Shop.ForTable(src.Tables[0]); err != nil {
			return mcfg, fmt.Errorf("order source %s: %w", src.Name, err)
		}
	}
	return mcfg, nil
}

// checkSource is the start-up check of an order source's database: the
// executor's tables beside its orders and every order table it lists. A
// schema that lacks something refuses the start, naming the source and
// the table with the statement that fixes it; a check that cannot read
// the database (it stopped answering after the probe) is logged, as
// openSource logs one that does not answer, and the start goes on.
func checkSource(ctx context.Context, cfg *config.Config, src config.Source, db *sqlx.DB, logger *slog.Logger) error {
	mcfg, err := SourceMigrationsConfig(cfg, src, true)
	if err != nil {
		return err
	}
	m, err := migrations.New(db.DB, mcfg)
	if err != nil {
		return err
	}
	err = m.Check(ctx)
	var se *migrations.SchemaError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &se):
		return fmt.Errorf("order source %s: %w", src.Name, err)
	}
	// Not an answer about the schema: the database went away after the
	// probe, or the check could not read it; the runs will say more.
	logger.Warn("order source schema not checked; its units fail if it lacks what they use", "source", src.Name, "err", err)
	return nil
}

// checkDatabase refuses to start serve or run on a database the jobs would
// fail on later, one order at a time: a schema that lacks a table, column
// or index they use, or a session time zone with daylight saving
// (checkZone). Each order source's own session is judged the same way by
// openSource (checkSourceZone).
func checkDatabase(ctx context.Context, cfg *config.Config, db *sqlx.DB, logger *slog.Logger) error {
	mcfg, err := MigrationsConfig(cfg)
	if err != nil {
		return err
	}
	m, err := migrations.New(db.DB, mcfg)
	if err != nil {
		return err
	}
	if err := m.Check(ctx); err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	if st, err := m.Status(ctx); err != nil {
		logger.Warn("cannot read the migration history", "err", err)
	} else if n := st.Pending(); n > 0 {
		logger.Warn("migration steps are pending; the schema has what this executor needs, but run executor migrate",
			"num_pending", n, "history_table", st.Table)
	}
	zone, err := dbserver.ReadSessionZone(ctx, db, time.Now().UTC().Year())
	if err != nil {
		return fmt.Errorf("mysql: %w", err)
	}
	return checkZone(cfg, zone, zoneSession{}, logger)
}

// checkSourceZone is checkZone for the session of order source src. A
// source whose zone cannot be read (it stopped answering after the probe)
// is logged, as checkSource logs a schema it cannot read, and the start
// goes on. A source on mysql.dsn's database is skipped: it has a pool of
// its own, but the same DSN once normalised and so the same session
// settings (mysql.timeZone included), which checkDatabase has judged
// already; judging them again would only repeat its line.
func checkSourceZone(ctx context.Context, cfg *config.Config, src config.Source, db *sqlx.DB, logger *slog.Logger) error {
	if cfg.OnHomeDatabase(src) {
		return nil
	}
	zone, err := dbserver.ReadSessionZone(ctx, db, time.Now().UTC().Year())
	if err != nil {
		logger.Warn("order source session time zone not checked; if it observes daylight saving, its orders close "+
			"up to an hour early or late around each change", "source", src.Name, "err", err)
		return nil
	}
	return checkZone(cfg, zone, zoneSession{source: src.Name}, logger)
}

// zoneSession names the session checkZone judges in its messages:
// mysql.dsn's, or order source source's.
type zoneSession struct{ source string }

// prefix starts a refusal: "mysql" or "order source NAME".
func (s zoneSession) prefix() string {
	if s.source == "" {
		return "mysql"
	}
	return "order source " + s.source
}

// subject is the zone in a log line, loud in capitals for the warning.
func (s zoneSession) subject(loud bool) string {
	switch {
	case s.source == "" && loud:
		return "THE MYSQL SESSION TIME ZONE"
	case s.source == "":
		return "the mysql session time zone"
	case loud:
		return "THE SESSION TIME ZONE OF ORDER SOURCE " + s.source
	}
	return "the session time zone of order source " + s.source
}

// attrs are a log line's attributes: the zone, and the source if any.
func (s zoneSession) attrs(zone dbserver.SessionZone) []any {
	if s.source == "" {
		return []any{"zone", zone.String()}
	}
	return []any{"source", s.source, "zone", zone.String()}
}

// checkZone judges session s's time zone: one with daylight saving is
// refused unless mysql.allowDSTZone accepts it, with a loud warning. A
// shop whose order times are Unix epoch integers (order.schema.timeUnit,
// which every order source shares) is not refused for the zone: its
// orders are compared with the clock's instant, and what the executor's
// own tables keep on the wall clock only moves retries and records by up
// to an hour (docs/time-zones.md lists each); one Info line says so.
func checkZone(cfg *config.Config, zone dbserver.SessionZone, s zoneSession, logger *slog.Logger) error {
	if !zone.ObservesDST() {
		return nil
	}
	sch, err := cfg.Order.Schema.Schema()
	if err != nil {
		return fmt.Errorf("order.schema: %w", err)
	}
	if unit := sch.Orders.TimeUnit; unit.Epoch() {
		logger.Info(s.subject(false)+" observes daylight saving; no matter for order.schema.timeUnit "+unit.String()+
			": its orders are compared with the database clock's instant, which no change moves; around a change only the "+
			"executor's own retry times and records can be up to an hour off (docs/time-zones.md)", s.attrs(zone)...)
		return nil
	}
	if !cfg.MySQL.AllowDSTZone {
		return fmt.Errorf("%s: the session time zone observes daylight saving (%s): %s is compared "+
			"with NOW() as a wall clock, so orders due in the hour around a change close up to an hour early in spring "+
			"and late in autumn. Have the order service and the executor write and compare in UTC or a fixed offset "+
			"(mysql.timeZone, e.g. '+00:00'), or set mysql.allowDSTZone: true (MYSQL_ALLOW_DST_ZONE) to accept the risk; "+
			"see docs/time-zones.md", s.prefix(), zone, orderTimeColumn(sch.Orders))
	}
	logger.Warn("!!! "+s.subject(true)+" OBSERVES DAYLIGHT SAVING: around each change orders close up to an hour "+
		"early (spring) or late (autumn); mysql.allowDSTZone is true, so the executor runs anyway (docs/time-zones.md)",
		s.attrs(zone)...)
	return nil
}

// orderTimeColumn names the column the scan compares with NOW(), as
// table.column: the deadline itself, or the time the order was placed.
func orderTimeColumn(o schema.Orders) string {
	return o.Table + "." + cmp.Or(o.DueTime, o.CreateTime)
}
