package migrations

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	orderschema "github.com/orderjob/executor/orders/schema"
)

// DefaultTable is the history table unless Config.Table names another.
const DefaultTable = "order_job_schema_migrations"

// legacyTable is where executors kept their history before DefaultTable.
const legacyTable = "schema_migrations"

// Config configures a Migrator.
type Config struct {
	// Table is the history table. Default DefaultTable. A table of that
	// name that is not shaped like the executor's history is never written.
	Table string
	// AllowCopy lets an ALTER that the server can run neither instantly nor
	// in place without locks run anyway (it may copy the table and block
	// writes to it meanwhile). Default false: the migrator stops and says so.
	AllowCopy bool
	// LockWaitTimeout bounds each statement's wait for its table's metadata
	// lock (lock_wait_timeout). Default 30s.
	LockWaitTimeout time.Duration
	// Out receives a line before and after each step and statement. Nil
	// discards them.
	Out io.Writer
	// Shop is where the shop keeps its orders (order.schema). When it is
	// Declared, the steps that create or change the shop's tables (those of
	// schema.Default and the declared ones) are recorded as skipped and
	// never run, and Check verifies the declared tables instead: every
	// column, its kind of type, the unique keys and the indexes the close
	// uses. The zero value declares nothing: the executor's own schema.
	Shop orderschema.Schema
	// GivebacksByEvents says stock and coupons are given back by outbox
	// events, not in this database: Check leaves the declared stock and
	// coupon tables out.
	GivebacksByEvents bool
	// OrderTables are this database's order tables that order.sources
	// lists. Check and Status verify each as the schema's order table is
	// verified, with its item table following the suffix (order_info_3,
	// order_item_3): the columns and indexes the close and the lifecycle
	// jobs use. migrate never creates or changes them; their problems
	// (Source "order.sources") carry the statement a DBA runs. With a
	// declared Shop, the shop's tables checked are those of the first
	// order table (Shop.ForTable), and each other one is checked as its
	// unit.
	OrderTables []string
	// RunSkipped runs the steps recorded as skipped for order.schema (the
	// operator dropped the declaration and wants the executor's own order
	// tables). Without it, and without a declaration, such steps stop the
	// migration before anything runs. Refused with a declared Shop.
	RunSkipped bool
}

// Migrator applies the migrations to one database.
type Migrator struct {
	db    *sql.DB
	cfg   Config
	steps []Migration
	want  schema
	shop  map[string]bool    // the shop's tables: never touched when cfg.Shop is Declared
	units orderschema.Schema // the schema Config.OrderTables follow
}

var identPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// New returns a Migrator of the embedded migrations.
func New(db *sql.DB, cfg Config) (*Migrator, error) {
	steps, err := All()
	if err != nil {
		return nil, err
	}
	return newMigrator(db, cfg, steps)
}

func newMigrator(db *sql.DB, cfg Config, steps []Migration) (*Migrator, error) {
	cfg.Table = cmp.Or(cfg.Table, DefaultTable)
	if !identPattern.MatchString(cfg.Table) {
		return nil, fmt.Errorf("migrations: history table %q: want letters, digits and _ (at most 64)", cfg.Table)
	}
	cfg.Table = strings.ToLower(cfg.Table)
	cfg.LockWaitTimeout = cmp.Or(cfg.LockWaitTimeout, 30*time.Second)
	if cfg.LockWaitTimeout < time.Second {
		return nil, fmt.Errorf("migrations: lock wait timeout %s is below 1s", cfg.LockWaitTimeout)
	}
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	want, err := expected(steps)
	if err != nil {
		return nil, err
	}
	units := orderschema.Default()
	if cfg.Shop.Declared {
		units = cfg.Shop
		if len(cfg.OrderTables) > 0 {
			if cfg.Shop, err = cfg.Shop.ForTable(cfg.OrderTables[0]); err != nil {
				return nil, fmt.Errorf("migrations: %w", err)
			}
		}
	}
	m := &Migrator{db: db, cfg: cfg, steps: steps, want: want, shop: shopTables(cfg.Shop), units: units}
	if err := m.checkShopConfig(); err != nil {
		return nil, err
	}
	return m, nil
}

// Apply brings the database up to date with the default Config and returns
// the versions it applied. It is what tests and benches call.
func Apply(ctx context.Context, db *sql.DB) ([]int, error) {
	m, err := New(db, Config{})
	if err != nil {
		return nil, err
	}
	res, err := m.Migrate(ctx)
	return res.Applied, err
}

// Result says what Migrate did.
type Result struct {
	Applied []int // versions run
	Carried []int // versions whose record was carried over from the older history table
	Added   int   // statements run after the steps for what was still missing
	Skipped []int // versions recorded as skipped: they change the shop's declared tables
}

// SchemaError lists what in the database keeps the executor from working.
type SchemaError struct {
	Problems []Problem
}

func (e *SchemaError) Error() string {
	switch {
	case !slices.ContainsFunc(e.Problems, func(p Problem) bool { return p.Source != SourcesSetting }):
		// Only the order tables order.sources lists: nothing migrate adds.
		return e.list(fmt.Sprintf("the order tables listed in order.sources are not what the executor needs (%d to fix; "+
			"executor migrate never changes them, the fixes are for a DBA):", len(e.Problems)))
	case !slices.ContainsFunc(e.Problems, func(p Problem) bool { return p.Source == "" }):
		// Only the shop's tables: nothing executor migrate adds.
		return e.list(fmt.Sprintf("the shop's tables declared in order.schema are not what the close needs (%d to fix; "+
			"executor migrate never changes them, the fixes are for a DBA or the configuration):", len(e.Problems)))
	case len(e.Problems) == 1:
		return "the database is not what the executor needs: " + e.Problems[0].String()
	case !slices.ContainsFunc(e.Problems, func(p Problem) bool { return !p.Missing }):
		// All missing (a database never migrated): one line.
		names := make([]string, len(e.Problems))
		for i, p := range e.Problems {
			names[i] = strings.TrimSuffix(strings.TrimSuffix(p.String(), ": "+runMigrate), " "+p.Detail)
		}
		return fmt.Sprintf("the database lacks %d tables, columns or indexes the executor needs (%s): %s",
			len(e.Problems), strings.Join(names, ", "), runMigrate)
	}
	return e.list(fmt.Sprintf("the database is not what the executor needs (%d problems):", len(e.Problems)))
}

// list is head followed by every problem, one an indented line.
func (e *SchemaError) list(head string) string {
	var b strings.Builder
	b.WriteString(head)
	for _, p := range e.Problems {
		b.WriteString("\n  " + p.String())
	}
	return b.String()
}

// CopyError is an ALTER the server can only run by copying the table (or
// with a lock), refused because Config.AllowCopy is false.
type CopyError struct {
	Step   string // e.g. 0052_order_info_widen
	SQL    string
	Reason string // the server's answer to ALGORITHM=INPLACE, LOCK=NONE
}

func (e *CopyError) Error() string {
	return fmt.Sprintf("%s: %s cannot run in place without locks (%s); the server would copy the table "+
		"and block its writes meanwhile. Nothing of this statement ran. Run `executor migrate -allow-copy` off-peak, or run the statement yourself",
		e.Step, e.SQL, e.Reason)
}

// Migrate applies the pending steps, adds what is still missing, and checks
// the result. Nothing runs when the plan finds an incompatible column or
// index (a *SchemaError). Several processes may call it at once: a named
// lock per database serialises them.
func (m *Migrator) Migrate(ctx context.Context) (Result, error) {
	var res Result
	conn, err := m.db.Conn(ctx)
	if err != nil {
		return res, fmt.Errorf("migrations: connect: %w", err)
	}
	defer conn.Close()
	if err := takeLock(ctx, conn, m.cfg.Table, time.Minute); err != nil {
		return res, fmt.Errorf("migrations: %w", err)
	}
	defer releaseLock(context.WithoutCancel(ctx), conn, m.cfg.Table)
	if _, err := conn.ExecContext(ctx, lockWaitSQL, int(m.cfg.LockWaitTimeout.Seconds())); err != nil {
		return res, fmt.Errorf("migrations: set lock_wait_timeout: %w", err)
	}

	p, err := m.makePlan(ctx, conn)
	if err != nil {
		return res, err
	}
	if len(p.blocked) > 0 {
		return res, &SkippedError{Steps: p.blocked}
	}
	if len(p.problems) > 0 {
		return res, &SchemaError{Problems: p.problems}
	}
	if err := m.history(ctx, conn, p, &res); err != nil {
		return res, err
	}
	if err := m.apply(ctx, conn, p, &res); err != nil {
		return res, err
	}
	if err := m.ensure(ctx, conn, p, &res); err != nil {
		return res, err
	}
	if err := m.check(ctx, conn); err != nil {
		return res, err
	}
	return res, nil
}

// history notes steps recorded by a newer executor, creates the history
// table when missing, and records the steps skipped and carried over.
func (m *Migrator) history(ctx context.Context, conn *sql.Conn, p *plan, res *Result) error {
	out := m.cfg.Out
	for _, u := range p.unknown {
		fmt.Fprintf(out, "note: %04d_%s is recorded but this executor has no such step (a newer executor applied it)\n", u.Version, u.Name)
	}
	if !p.historyExists {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf(createHistorySQL, m.cfg.Table)); err != nil {
			return fmt.Errorf("migrations: create %s: %w", m.cfg.Table, err)
		}
		fmt.Fprintf(out, "created history table %s\n", m.cfg.Table)
	}
	if err := m.recordSkips(ctx, conn, p); err != nil {
		return err
	}
	for _, s := range p.skip {
		res.Skipped = append(res.Skipped, s.Version)
	}
	for _, s := range p.carry {
		if err := record(ctx, conn, m.cfg.Table, s, 0, p.carryFrom); err != nil {
			return fmt.Errorf("migrations: carry over: %w", err)
		}
		res.Carried = append(res.Carried, s.Version)
	}
	if len(p.carry) > 0 {
		fmt.Fprintf(out, "carried over %d steps from %s (left as it is: drop it once no older executor runs)\n", len(p.carry), p.carryFrom)
	}
	return nil
}

// apply runs the pending steps in order, recording each once done.
func (m *Migrator) apply(ctx context.Context, conn *sql.Conn, p *plan, res *Result) error {
	out := m.cfg.Out
	for _, sp := range p.steps {
		start := time.Now()
		fmt.Fprintf(out, "%s: start at %s\n", sp.Step.ID(), start.UTC().Format("2006-01-02 15:04:05.000 UTC"))
		if err := m.run(ctx, conn, sp.Step.ID(), sp.Actions); err != nil {
			return err
		}
		took := time.Since(start)
		rec := func() error { return record(ctx, conn, m.cfg.Table, sp.Step, took, "") }
		if sp.Rerun {
			rec = func() error { return recordRan(ctx, conn, m.cfg.Table, sp.Step, took) }
		}
		if err := rec(); err != nil {
			return fmt.Errorf("migrations: %w", err)
		}
		fmt.Fprintf(out, "%s: done in %s\n", sp.Step.ID(), took.Round(time.Millisecond))
		res.Applied = append(res.Applied, sp.Step.Version)
	}
	return nil
}

// ensure adds what the schema check found missing.
func (m *Migrator) ensure(ctx context.Context, conn *sql.Conn, p *plan, res *Result) error {
	if len(p.ensure) == 0 {
		return nil
	}
	out := m.cfg.Out
	start := time.Now()
	fmt.Fprintf(out, "schema check: start at %s\n", start.UTC().Format("2006-01-02 15:04:05.000 UTC"))
	if err := m.run(ctx, conn, "schema check", p.ensure); err != nil {
		return err
	}
	for _, a := range p.ensure {
		if a.SQL != "" {
			res.Added++
		}
	}
	fmt.Fprintf(out, "schema check: done in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// run runs a step's actions, printing each statement and its time.
func (m *Migrator) run(ctx context.Context, c *sql.Conn, step string, acts []action) error {
	out := m.cfg.Out
	for _, a := range acts {
		if a.Note != "" {
			fmt.Fprintf(out, "  -- %s\n", a.Note)
		}
		if a.SQL == "" {
			continue
		}
		fmt.Fprintf(out, "  %s\n", oneLine(a.SQL, 240))
		start := time.Now()
		how := ""
		var err error
		if a.Alter {
			how, err = m.alter(ctx, c, step, a)
		} else {
			_, err = c.ExecContext(ctx, a.SQL)
		}
		if err != nil {
			var me *mysql.MySQLError
			if errors.As(err, &me) && me.Number == 1205 {
				return fmt.Errorf("migrations: %s: %s: waited %s for the table's metadata lock (a long transaction or another DDL holds it); "+
					"this statement changed nothing; rerun executor migrate when the table is quiet: %w",
					step, oneLine(a.SQL, 120), m.cfg.LockWaitTimeout, err)
			}
			var ce *CopyError
			if errors.As(err, &ce) {
				return err
			}
			return fmt.Errorf("migrations: %s: %s: %w", step, oneLine(a.SQL, 120), err)
		}
		if how != "" {
			how = how + ", "
		}
		fmt.Fprintf(out, "  ok (%s%s)\n", how, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

const (
	algoInstant = "ALGORITHM=INSTANT"
	algoInplace = "ALGORITHM=INPLACE, LOCK=NONE"
)

// alter runs an ALTER TABLE with the least locking the server offers: an
// instant metadata change, else an in-place build that lets reads and
// writes go on, else (only with AllowCopy) whatever the server picks, which
// may copy the table. It returns the algorithm used.
func (m *Migrator) alter(ctx context.Context, c *sql.Conn, step string, a action) (string, error) {
	stmt := a.SQL
	if !a.Inplace {
		_, err := c.ExecContext(ctx, stmt+", "+algoInstant)
		if err == nil {
			return algoInstant, nil
		}
		if !unsupported(err, true) {
			return "", err
		}
	}
	_, err := c.ExecContext(ctx, stmt+", "+algoInplace)
	if err == nil {
		return algoInplace, nil
	}
	if !unsupported(err, false) {
		return "", err
	}
	if !m.cfg.AllowCopy {
		return "", &CopyError{Step: step, SQL: oneLine(stmt, 240), Reason: serverMessage(err)}
	}
	fmt.Fprintf(m.cfg.Out, "  -- cannot run in place without locks (%s); -allow-copy: running it as the server chooses\n", serverMessage(err))
	if _, err := c.ExecContext(ctx, stmt); err != nil {
		return "", err
	}
	return "server's choice (-allow-copy)", nil
}

// unsupported reports whether err means "this ALGORITHM or LOCK is not
// possible for this statement". A server without ALGORITHM=INSTANT (MySQL
// 5.7, MariaDB before 10.3) answers it with a syntax error.
func unsupported(err error, instant bool) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case 1845, 1846: // ER_ALTER_OPERATION_NOT_SUPPORTED(_REASON)
		return true
	case 1064:
		return instant && strings.Contains(strings.ToUpper(me.Message), "INSTANT")
	}
	return false
}

func serverMessage(err error) string {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Message
	}
	return err.Error()
}

// Check reports, as a *SchemaError, every table, column and index the
// executor relies on that the database lacks or has in a form it cannot
// use. serve and run call it before they start.
func (m *Migrator) Check(ctx context.Context) error {
	return m.check(ctx, m.db)
}

func (m *Migrator) check(ctx context.Context, q querier) error {
	names := tableNames(m.steps)
	if m.cfg.Shop.Declared {
		names = append(names, declaredTables(m.cfg.Shop)...)
		slices.Sort(names)
		names = slices.Compact(names) // a shop may keep its orders in order_info
	}
	for _, u := range m.unitTables() {
		names = append(names, u[0], u[1])
	}
	live, err := readSchema(ctx, q, names)
	if err != nil {
		return fmt.Errorf("migrations: check: %w", err)
	}
	probs := diffSchema(m.needed(), live)
	if m.cfg.Shop.Declared {
		probs = append(probs, m.shopProblems(live)...)
	}
	probs = append(probs, m.unitProblems(live)...)
	if len(probs) > 0 {
		return &SchemaError{Problems: probs}
	}
	return nil
}

// oneLine collapses whitespace and cuts s to at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(strings.ReplaceAll(s, "( ", "("), " )", ")")
	if n > 0 && len(s) > n {
		return s[:n-3] + "..."
	}
	return s
}
