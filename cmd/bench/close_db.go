package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/orderjob/executor/internal/app"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/sql/migrations"
)

// benchDBs creates the bench's databases (all named bench_close_{run}_{name})
// on one server and drops every one of them at the end; it never touches a
// database it did not create.
type benchDBs struct {
	cfg     *mysql.Config // server DSN, no database
	admin   *sqlx.DB
	run     string
	created []string
	open    map[string]*sqlx.DB
	// beforeDrop runs, per database, before it is dropped (the lying
	// statistics are removed from the mysql schema that way).
	beforeDrop map[string]func(context.Context) error
}

// onDrop registers fn to run before database name is dropped.
func (d *benchDBs) onDrop(name string, fn func(context.Context) error) {
	if d.beforeDrop == nil {
		d.beforeDrop = map[string]func(context.Context) error{}
	}
	d.beforeDrop[name] = fn
}

func newBenchDBs(ctx context.Context, serverDSN string) (*benchDBs, error) {
	cfg, err := dbtest.AdminConfig(serverDSN)
	if err != nil {
		return nil, fmt.Errorf("-dsn: %w", err)
	}
	admin, err := sqlx.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, err
	}
	if err := app.PingOrClose(ctx, admin); err != nil {
		return nil, fmt.Errorf("MySQL at %s does not answer: %w", cfg.Addr, err)
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return &benchDBs{cfg: cfg, admin: admin, run: hex.EncodeToString(b)}, nil
}

// dsn returns the DSN of database name.
func (d *benchDBs) dsn(name string) string {
	c := d.cfg.Clone()
	c.DBName = name
	return c.FormatDSN()
}

func (d *benchDBs) name(label string) string { return "bench_close_" + d.run + "_" + label }

// create makes an empty database and opens it.
func (d *benchDBs) create(ctx context.Context, label string) (*sqlx.DB, string, error) {
	name := d.name(label)
	if _, err := d.admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4"); err != nil {
		return nil, "", fmt.Errorf("create database %s: %w", name, err)
	}
	d.created = append(d.created, name)
	db, err := sqlx.Open("mysql", d.dsn(name))
	if err != nil {
		return nil, "", err
	}
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	if d.open == nil {
		d.open = map[string]*sqlx.DB{}
	}
	d.open[name] = db
	return db, name, nil
}

// migrated creates a database with the executor's schema.
func (d *benchDBs) migrated(ctx context.Context, label string) (*sqlx.DB, string, error) {
	db, name, err := d.create(ctx, label)
	if err != nil {
		return nil, "", err
	}
	if _, err := migrations.Apply(ctx, db.DB); err != nil {
		return nil, "", fmt.Errorf("migrate %s: %w", name, err)
	}
	return db, name, nil
}

// orderTables are the tables a copy takes (order_close_run: every run of
// ours writes its record there, as in production).
var orderTables = []string{"order_info", "order_item", "inventory", "user_coupon", "order_close_log", "order_dead_letter", "order_close_run"}

// cloneDB copies the order tables of database from into a new database
// (CREATE TABLE ... LIKE, INSERT ... SELECT), so each approach starts from
// the same rows.
func (d *benchDBs) cloneDB(ctx context.Context, from, label string) (*sqlx.DB, string, error) {
	return d.cloneTables(ctx, from, label, orderTables, "order_info")
}

// cloneTables copies tables of database from into a new database, as
// cloneDB does, and analyzes the tables named in analyze (the order
// tables the close scans).
func (d *benchDBs) cloneTables(ctx context.Context, from, label string, tables []string, analyze ...string) (*sqlx.DB, string, error) {
	db, name, err := d.create(ctx, label)
	if err != nil {
		return nil, "", err
	}
	for _, t := range tables {
		for _, stmt := range []string{
			fmt.Sprintf("CREATE TABLE `%s`.`%s` LIKE `%s`.`%s`", name, t, from, t),
			fmt.Sprintf("INSERT INTO `%s`.`%s` SELECT * FROM `%s`.`%s`", name, t, from, t),
		} {
			if _, err := d.admin.ExecContext(ctx, stmt); err != nil {
				return nil, "", fmt.Errorf("copy %s.%s: %w", from, t, err)
			}
		}
	}
	for _, t := range analyze {
		if _, err := db.ExecContext(ctx, "ANALYZE TABLE `"+t+"`"); err != nil {
			return nil, "", fmt.Errorf("analyze %s.%s: %w", name, t, err)
		}
	}
	return db, name, nil
}

// tables lists the tables of database name.
func (d *benchDBs) tables(ctx context.Context, name string) ([]string, error) {
	var out []string
	err := d.admin.SelectContext(ctx, &out, `SELECT table_name FROM information_schema.tables WHERE table_schema = ? ORDER BY table_name`, name)
	if err != nil {
		return nil, fmt.Errorf("list the tables of %s: %w", name, err)
	}
	return out, nil
}

// columns lists the columns of table in database name, in their order.
func (d *benchDBs) columns(ctx context.Context, name, table string) ([]string, error) {
	var out []string
	err := d.admin.SelectContext(ctx, &out, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = ? AND table_name = ? ORDER BY ordinal_position`, name, table)
	if err != nil {
		return nil, fmt.Errorf("list the columns of %s.%s: %w", name, table, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("list the columns of %s.%s: no such table", name, table)
	}
	return out, nil
}

// skeleton creates database label with every table of database from,
// empty (CREATE TABLE ... LIKE), but those in except.
func (d *benchDBs) skeleton(ctx context.Context, from, label string, except ...string) (*sqlx.DB, string, error) {
	tables, err := d.tables(ctx, from)
	if err != nil {
		return nil, "", err
	}
	db, name, err := d.create(ctx, label)
	if err != nil {
		return nil, "", err
	}
	for _, t := range tables {
		if slices.Contains(except, t) {
			continue
		}
		if _, err := d.admin.ExecContext(ctx, fmt.Sprintf("CREATE TABLE `%s`.`%s` LIKE `%s`.`%s`", name, t, from, t)); err != nil {
			return nil, "", fmt.Errorf("create %s.%s: %w", name, t, err)
		}
	}
	return db, name, nil
}

// execAll runs stmts on the server, in order.
func (d *benchDBs) execAll(ctx context.Context, what string, stmts ...string) error {
	for _, q := range stmts {
		if _, err := d.admin.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w\n%s", what, err, q)
		}
	}
	return nil
}

// drop closes and drops one database this run created (running what
// onDrop registered for it first), so that a large table done with frees
// the server's buffer pool and disk for the next measurement.
func (d *benchDBs) drop(ctx context.Context, name string) error {
	if !strings.HasPrefix(name, "bench_close_"+d.run+"_") {
		return fmt.Errorf("bench: not dropping %s, which this run did not create", name)
	}
	var errs []error
	if fn := d.beforeDrop[name]; fn != nil {
		delete(d.beforeDrop, name)
		if err := fn(ctx); err != nil {
			errs = append(errs, fmt.Errorf("before dropping %s: %w", name, err))
		}
	}
	if db := d.open[name]; db != nil {
		delete(d.open, name)
		db.Close()
	}
	if _, err := d.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
		return errors.Join(append(errs, fmt.Errorf("drop %s: %w", name, err))...)
	}
	d.created = slices.DeleteFunc(d.created, func(n string) bool { return n == name })
	return errors.Join(errs...)
}

// dropAll closes and drops every database this run created.
func (d *benchDBs) dropAll() []error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []error
	for _, name := range slices.Clone(d.created) {
		if err := d.drop(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	d.admin.Close()
	return errs
}

// settle waits, up to limit, until InnoDB has purged the undo history the
// previous measurements left (a 1,000,000-order drain leaves 900,000
// updated rows to purge), so that each measurement starts from a server in
// the same state rather than paying for the one before. It returns how long
// it waited.
func (d *benchDBs) settle(ctx context.Context, limit time.Duration) time.Duration {
	start := time.Now()
	for time.Since(start) < limit && ctx.Err() == nil {
		var name string
		var n int64
		if err := d.admin.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Innodb_history_list_length'").Scan(&name, &n); err != nil || n < 20_000 {
			break
		}
		time.Sleep(time.Second)
	}
	return time.Since(start).Round(time.Second)
}

// dropRedisKeys deletes the bench's lock keys.
func dropRedisKeys(c *redis.Client, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		c.Del(ctx, iter.Val())
	}
}

func serverVersion(ctx context.Context, db *sqlx.DB) string {
	var v string
	if err := db.GetContext(ctx, &v, "SELECT VERSION()"); err != nil {
		return "unknown"
	}
	return v
}
