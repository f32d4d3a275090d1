package mariadbtest

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

// TzinfoToSQLPath is the tool that turns the operating system's zoneinfo
// into the server's time-zone tables.
var TzinfoToSQLPath = firstExisting("/usr/bin/mariadb-tzinfo-to-sql", "mariadb-tzinfo-to-sql")

// LoadZone loads zone (e.g. "Europe/Berlin") into the server's time-zone
// tables from /usr/share/zoneinfo, so a session may set time_zone to its
// name, as a DSN's time_zone parameter does. One zone takes well under a
// second; the shared server has no zone tables and must not be changed.
func (s *Server) LoadZone(t testing.TB, zone string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	script, err := exec.CommandContext(ctx, TzinfoToSQLPath, "/usr/share/zoneinfo/"+zone, zone).Output()
	if err != nil {
		t.Fatalf("mariadbtest: turn zone %s into SQL: %v", zone, err)
	}
	cfg, err := mysql.ParseDSN(s.DSN("mysql"))
	if err != nil {
		t.Fatalf("mariadbtest: %v", err)
	}
	cfg.MultiStatements = true
	db, err := sqlx.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatalf("mariadbtest: %v", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, string(script)); err != nil {
		t.Fatalf("mariadbtest: load zone %s into the server's tables: %v", zone, err)
	}
}
