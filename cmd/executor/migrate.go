package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/app"
	"github.com/orderjob/executor/sql/migrations"
)

func migrateCommand() *command {
	return &command{name: "migrate", flags: migrateFlags,
		summary: "create or update the schema next to other tools' tables (idempotent; safe on existing order tables)",
		sub: []*command{{name: "status", flags: migrateStatusFlags,
			summary: "list applied and pending steps and the schema's drift; exit 1 unless up to date"}}}
}

func migrateFlags(fs *flag.FlagSet, env *cliEnv) runFunc {
	dry := fs.Bool("dry-run", false, "print every statement migrate would run, as a SQL script, and change nothing")
	allowCopy := fs.Bool("allow-copy", false, "let an ALTER the server cannot run in place without locks copy the table (blocks its writes meanwhile)")
	lockWait := fs.Duration("lock-wait-timeout", 30*time.Second, "longest wait of each statement for its table's metadata lock")
	create := fs.Bool("create-database", false, "create the DSN's database first when it does not exist")
	runSkipped := fs.Bool("run-skipped", false, "run the steps skipped while order.schema declared the shop's tables (after removing the declaration): creates the executor's own order tables")
	return func(ctx context.Context, _ []string) error {
		if *lockWait < time.Second {
			return usagef("-lock-wait-timeout %s: want at least 1s", *lockWait)
		}
		return migrate(ctx, env, *dry, *create, migrations.Config{AllowCopy: *allowCopy, LockWaitTimeout: *lockWait,
			Out: env.stdout, RunSkipped: *runSkipped})
	}
}

// withConfig fills in what mcfg takes from the configuration: the history
// table, the declared schema and, with order.sources, the order table
// that stands for it in mysql.dsn's database.
func withConfig(cfg *config.Config, mcfg migrations.Config) (migrations.Config, error) {
	from, err := app.MigrationsConfig(cfg)
	if err != nil {
		return mcfg, err
	}
	mcfg.Table, mcfg.Shop, mcfg.GivebacksByEvents, mcfg.OrderTables = from.Table, from.Shop, from.GivebacksByEvents, from.OrderTables
	return mcfg, nil
}

func migrate(ctx context.Context, env *cliEnv, dry, create bool, mcfg migrations.Config) error {
	if dry && create {
		return dryRunCreate(ctx, env, mcfg)
	}
	if create {
		if err := createDatabase(ctx, env); err != nil {
			return err
		}
	}
	cfg, db, err := loadConfigDB(ctx, env)
	if err != nil {
		return err
	}
	defer db.Close()
	if mcfg, err = withConfig(cfg, mcfg); err != nil {
		return err
	}
	if err := migrateDB(ctx, env, db, mcfg, dry); err != nil {
		return err
	}
	return migrateSources(ctx, env, cfg, mcfg, dry)
}

// migrateDB migrates one database, or prints its script with dry.
func migrateDB(ctx context.Context, env *cliEnv, db *sqlx.DB, mcfg migrations.Config, dry bool) error {
	m, err := migrations.New(db.DB, mcfg)
	if err != nil {
		return err
	}
	if dry {
		return m.DryRun(ctx, env.stdout)
	}
	res, err := m.Migrate(ctx)
	if err != nil {
		return migratePrivileges(err)
	}
	if len(res.Applied) == 0 && res.Added == 0 && len(res.Carried) == 0 && len(res.Skipped) == 0 {
		fmt.Fprintln(env.stdout, "schema is up to date")
		return nil
	}
	skipped := ""
	if len(res.Skipped) > 0 {
		skipped = fmt.Sprintf(", %d skipped (order.schema: the shop's tables are left as they are)", len(res.Skipped))
	}
	fmt.Fprintf(env.stdout, "schema is up to date: %d steps applied, %d carried over, %d statements for what was missing%s\n",
		len(res.Applied), len(res.Carried), res.Added, skipped)
	return nil
}

// MySQL error numbers of a user lacking a privilege on a table
// (ER_TABLEACCESS_DENIED_ERROR) or a column (ER_COLUMNACCESS_DENIED_ERROR).
const (
	erTableAccessDenied  = 1142
	erColumnAccessDenied = 1143
)

// migratePrivileges adds to an error of a database user that may not
// change the schema what migrate needs: it runs DDL, which serve and run
// never do, so a user made for them stops migrate at its first CREATE.
func migratePrivileges(err error) error {
	var me *mysql.MySQLError
	if !errors.As(err, &me) || (me.Number != erTableAccessDenied && me.Number != erColumnAccessDenied) {
		return err
	}
	return &grantError{err: err, fix: "migrate needs SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER and INDEX on the DSN's " +
		"database (GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX ON db.* TO user); serve and run need " +
		"only the first four (docs/configuration.md#the-database-user)"}
}

// createDatabase creates the database the DSN names, connecting to the
// server without it.
func createDatabase(ctx context.Context, env *cliEnv) error {
	_, server, name, err := openServer(ctx, env)
	if err != nil {
		return err
	}
	defer server.Close()
	return migrations.CreateDatabase(ctx, server.DB, name)
}

// dryRunCreate prints the script of `migrate -create-database` and creates
// nothing: the CREATE DATABASE, then the plan for the database as it is,
// or for an empty one when it does not exist yet.
func dryRunCreate(ctx context.Context, env *cliEnv, mcfg migrations.Config) error {
	cfg, server, name, err := openServer(ctx, env)
	if err != nil {
		return err
	}
	defer server.Close()
	exists, err := migrations.DatabaseExists(ctx, server.DB, name)
	if err != nil {
		return err
	}
	if mcfg, err = withConfig(cfg, mcfg); err != nil {
		return err
	}
	db := server
	if exists {
		if db, err = app.OpenDB(ctx, cfg); err != nil {
			return err
		}
		defer db.Close()
	}
	m, err := migrations.New(db.DB, mcfg)
	if err != nil {
		return err
	}
	return m.DryRunCreate(ctx, env.stdout, name, exists)
}

// openServer connects to the DSN's server without selecting its database
// and returns the configuration and the database's name.
func openServer(ctx context.Context, env *cliEnv) (*config.Config, *sqlx.DB, string, error) {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return nil, nil, "", err
	}
	// The loader refused a DSN without a database.
	mc, err := cfg.MySQL.DriverConfig()
	if err != nil {
		return nil, nil, "", fmt.Errorf("mysql: %w", err)
	}
	name := mc.DBName
	mc.DBName = ""
	serverCfg := *cfg
	serverCfg.MySQL.DSN = mc.FormatDSN()
	db, err := app.OpenDB(ctx, &serverCfg)
	if err != nil {
		return nil, nil, "", err
	}
	return cfg, db, name, nil
}

// migrateStatus prints every step with its state and checksum, and the
// schema's drift. Exit 1 when a step is pending or drifted or the schema
// lacks something, so a deploy can gate on it.
func migrateStatusFlags(fs *flag.FlagSet, env *cliEnv) runFunc {
	jsonOut := new(bool)
	addJSON(fs, jsonOut)
	return func(ctx context.Context, _ []string) error { return migrateStatus(ctx, env, *jsonOut) }
}

func migrateStatus(ctx context.Context, env *cliEnv, jsonOut bool) error {
	cfg, db, err := loadConfigDB(ctx, env)
	if err != nil {
		return err
	}
	defer db.Close()
	mcfg, err := app.MigrationsConfig(cfg)
	if err != nil {
		return err
	}
	m, err := migrations.New(db.DB, mcfg)
	if err != nil {
		return err
	}
	st, err := m.Status(ctx)
	if err != nil {
		return err
	}
	srcs, err := sourceStatuses(ctx, cfg)
	if err != nil {
		return err
	}
	if err := printStatuses(env, st, srcs, jsonOut); err != nil {
		return err
	}
	bad := !upToDate(st)
	for _, s := range srcs {
		bad = bad || s.Error != "" || !upToDate(s.Status)
	}
	if bad {
		return exitError{code: 1}
	}
	return nil
}

// upToDate reports whether st has nothing pending, drifted or missing.
func upToDate(st *migrations.Status) bool {
	return st.Pending() == 0 && st.Drifted() == 0 && len(st.Problems) == 0
}

func printStatus(env *cliEnv, st *migrations.Status) {
	w := tabwriter.NewWriter(env.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "history table: %s\n", st.Table)
	fmt.Fprintln(w, "STEP\tSTATE\tCHECKSUM\tAPPLIED (UTC)\tTOOK\tNOTE")
	for _, s := range st.Steps {
		applied, took, note := "", "", ""
		if !s.AppliedAt.IsZero() {
			applied = s.AppliedAt.Format("2006-01-02 15:04:05")
			took = (time.Duration(s.ExecutionMS) * time.Millisecond).String()
		}
		switch {
		case s.Drift:
			note = "DRIFT: the file changed after the step ran (recorded " + short(s.Recorded) + ")"
		case s.State == "unknown":
			note = "recorded by a newer executor; this one has no such file"
		case s.State == "carry":
			note = "recorded in " + s.CarriedFrom + "; the next migrate carries it over"
		case s.State == "skip":
			note = "changes the shop's tables (order.schema): the next migrate records it as skipped"
		case s.State == "skipped" && st.Declared:
			note = "skipped: order.schema declares the shop's tables"
		case s.State == "skipped":
			note = "skipped for order.schema, which declares nothing now: restore it, or run executor migrate -run-skipped"
		case s.CarriedFrom != "":
			note = "carried over from " + s.CarriedFrom
		}
		sum := short(s.Checksum)
		if sum == "" {
			sum = short(s.Recorded)
		}
		fmt.Fprintf(w, "%04d_%s\t%s\t%s\t%s\t%s\t%s\n", s.Version, s.Name, s.State, sum, applied, took, note)
	}
	w.Flush()
	var missing, drift, shop, units []migrations.Problem
	for _, p := range st.Problems {
		switch {
		case p.Source == migrations.SourcesSetting:
			units = append(units, p)
		case p.Source != "":
			shop = append(shop, p)
		case p.Missing:
			missing = append(missing, p)
		default:
			drift = append(drift, p)
		}
	}
	if notYetMigrated(st) && len(drift) == 0 && len(shop) == 0 && len(units) == 0 {
		fmt.Fprintf(env.stdout, "not yet migrated (%d pending migrations): run `executor migrate`\n", st.Pending())
		return
	}
	for _, p := range missing {
		fmt.Fprintf(env.stdout, "missing: %s\n", p)
	}
	for _, p := range drift {
		fmt.Fprintf(env.stdout, "schema drift: %s\n", p)
	}
	for _, p := range append(shop, units...) {
		fmt.Fprintf(env.stdout, "%s: %s\n", p.Source, p)
	}
	line := fmt.Sprintf("%d pending, %d drifted, %d missing (migrate adds them), %d schema drift", st.Pending(), st.Drifted(), len(missing), len(drift))
	if st.Declared {
		line += fmt.Sprintf(", %d skipped and %d problems of the shop's tables (order.schema)", st.Skipped(), len(shop))
	}
	if len(units) > 0 {
		line += fmt.Sprintf(", %d problems of the order tables (order.sources)", len(units))
	}
	fmt.Fprintln(env.stdout, line)
}

// notYetMigrated reports whether no step ever ran here: every step is
// pending (none applied, carried or unknown).
func notYetMigrated(st *migrations.Status) bool {
	for _, s := range st.Steps {
		if s.State != "pending" {
			return false
		}
	}
	return len(st.Steps) > 0
}

func short(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}
