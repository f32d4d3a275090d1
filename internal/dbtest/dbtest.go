// Package dbtest gives tests a real MariaDB/MySQL database of their own:
// created on the server named by TEST_MYSQL_DSN (default root on
// 127.0.0.1:3306), migrated with the embedded migrations, and dropped when the
// test ends. Packages and tests therefore run in parallel without sharing rows.
//
// A server that does not answer fails the test: a silently skipped
// integration test looks green.
package dbtest

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/sql/migrations"
)

// ServerDSN is the DSN of the test server without a database.
func ServerDSN() string {
	return cmp.Or(os.Getenv("TEST_MYSQL_DSN"), "root@tcp(127.0.0.1:3306)/")
}

// DB is a migrated database that lives as long as the test.
type DB struct {
	*sqlx.DB
	Name string // database name
	DSN  string // DSN that opens it, with parseTime, loc=UTC, interpolateParams
}

// Unconnected is a handle on a server nothing listens for, closed when the
// test ends: constructors given it check their settings without connecting.
func Unconnected(t testing.TB) *sqlx.DB {
	t.Helper()
	db, err := sqlx.Open("mysql", "nobody@tcp(127.0.0.1:1)/none")
	if err != nil {
		t.Fatalf("dbtest: open an unconnected handle: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// New creates, migrates and returns a fresh database for t.
func New(t testing.TB) *DB {
	t.Helper()
	d := NewEmpty(t)
	if _, err := migrations.Apply(context.Background(), d.DB.DB); err != nil {
		t.Fatalf("dbtest: migrate %s: %v", d.Name, err)
	}
	return d
}

// Count runs query, which selects one number (a COUNT), and returns it.
func (d *DB) Count(t testing.TB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := d.Get(&n, query, args...); err != nil {
		t.Fatalf("dbtest: %s: %v", query, err)
	}
	return n
}

// Now reads the database clock as the code under test does (sqlexec.Now).
func (d *DB) Now(t testing.TB) time.Time {
	t.Helper()
	now, err := sqlexec.Now(context.Background(), d.DB)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return now
}

var unsafeChars = regexp.MustCompile(`[^a-z0-9]+`)

// AdminConfig parses a server DSN (TEST_MYSQL_DSN's form) into the
// settings of a connection to no database, as test and bench databases are
// created and opened: times parsed in UTC, parameters interpolated.
func AdminConfig(serverDSN string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		return nil, err
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	cfg.DBName = ""
	return cfg, nil
}

// NewEmpty creates a fresh database without applying migrations.
func NewEmpty(t testing.TB) *DB {
	t.Helper()
	cfg, err := AdminConfig(ServerDSN())
	if err != nil {
		t.Fatalf("dbtest: TEST_MYSQL_DSN: %v", err)
	}
	admin, err := sqlx.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("dbtest: open: %v", err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		t.Fatalf("dbtest: MySQL at %s does not answer (%v); start MariaDB (see docs/development.md) or set TEST_MYSQL_DSN", cfg.Addr, err)
	}

	b := make([]byte, 4)
	_, _ = rand.Read(b)
	label := strings.Trim(unsafeChars.ReplaceAllString(strings.ToLower(t.Name()), "_"), "_")
	if len(label) > 40 {
		label = label[:40]
	}
	name := fmt.Sprintf("test_%s_%s", label, hex.EncodeToString(b))
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4"); err != nil {
		t.Fatalf("dbtest: create database %s: %v", name, err)
	}
	cfg.DBName = name
	dsn := cfg.FormatDSN()
	db, err := sqlx.Open("mysql", dsn)
	if err != nil {
		t.Fatalf("dbtest: open %s: %v", name, err)
	}
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	t.Cleanup(func() {
		db.Close()
		a, err := sqlx.Open("mysql", ServerDSN())
		if err != nil {
			t.Errorf("dbtest: reopen to drop %s: %v", name, err)
			return
		}
		defer a.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := a.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			t.Errorf("dbtest: drop database %s: %v", name, err)
		}
	})
	return &DB{DB: db, Name: name, DSN: dsn}
}

// NewUser creates a database user that has only the given privileges on
// d's tables and returns a DSN for d as that user (same options as d.DSN).
// Each grant is "PRIVILEGES ON TABLE", e.g. "SELECT, UPDATE ON
// order_close_log", or "... ON *" for every table of d. The user is dropped
// when the test ends. Use it to test what a missing privilege does.
func (d *DB) NewUser(t testing.TB, grants ...string) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	user := "tu_" + hex.EncodeToString(b)
	pw := hex.EncodeToString(b) + "Pw"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	exec := func(stmt string) {
		t.Helper()
		if _, err := d.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("dbtest: %s: %v", stmt, err)
		}
	}
	exec(fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", user, pw))
	t.Cleanup(func() {
		a, err := sqlx.Open("mysql", ServerDSN())
		if err != nil {
			t.Errorf("dbtest: reopen to drop user %s: %v", user, err)
			return
		}
		defer a.Close()
		if _, err := a.Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", user)); err != nil {
			t.Errorf("dbtest: drop user %s: %v", user, err)
		}
	})
	for _, g := range grants {
		privs, table, ok := strings.Cut(g, " ON ")
		if !ok {
			t.Fatalf("dbtest: grant %q is not \"PRIVILEGES ON TABLE\"", g)
		}
		target := "`" + d.Name + "`.*"
		if table = strings.TrimSpace(table); table != "*" {
			target = "`" + d.Name + "`.`" + table + "`"
		}
		exec(fmt.Sprintf("GRANT %s ON %s TO '%s'@'%%'", privs, target, user))
	}
	cfg, err := mysql.ParseDSN(d.DSN)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	cfg.User, cfg.Passwd = user, pw
	return cfg.FormatDSN()
}
