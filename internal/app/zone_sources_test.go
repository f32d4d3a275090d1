package app

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/config"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/mariadbtest"
	"github.com/orderjob/executor/internal/ordertest"
	"github.com/orderjob/executor/internal/syncbuf"
)

// berlinDSN is the DSN parameter that runs a session on Berlin's clock,
// quoted and with its '/' escaped, as the driver reads parameters.
const berlinDSN = "&time_zone=%27Europe%2FBerlin%27"

// berlinZone is how the start-up check describes that session's zone.
const berlinZone = "time_zone=Europe/Berlin: UTC+01:00 in January, UTC+02:00 in July"

// openZoned opens serve's and run's dependencies on home with two order
// sources, a and b, the configuration file yml and the environment extra;
// it returns the process log and Open's error.
func openZoned(t *testing.T, home, a, b, yml string, extra map[string]string) (string, error) {
	t.Helper()
	sources := fmt.Sprintf(`[{name: a, dsn: %q, tables: %s}, {name: b, dsn: %q, tables: %[2]s}]`, a, tableOf(yml), b)
	cfg, err := config.LoadWith([]byte(yml), sourcesEnv(t, home, extra, sources))
	require.NoError(t, err)
	var logged syncbuf.Buffer
	d, err := Open(context.Background(), cfg, slog.New(slog.NewTextHandler(&logged, nil)), Observers{})
	if d != nil {
		d.Close()
	}
	return logged.String(), err
}

// tableOf is the order table of configuration file yml.
func tableOf(yml string) string {
	if yml == "" {
		return "order_info"
	}
	return "t_order"
}

// Each order source's session is judged at start as mysql.dsn's is: two
// sources on servers in UTC, the second's DSN setting Berlin's zone, which
// observes daylight saving. The DATETIME schema is refused, naming b; with
// mysql.allowDSTZone it starts with the loud warning naming b; a shop
// keeping epoch times (order.schema.timeUnit) starts with one Info line
// naming b. Nothing is said about a or mysql.dsn's session, and a source
// on mysql.dsn's database is not judged twice.
func TestOpenJudgesEverySourcesSessionZone(t *testing.T) {
	t.Parallel()
	home, a := dbtest.New(t), dbtest.New(t)
	srv := mariadbtest.Start(t, mariadbtest.Options{})
	srv.LoadZone(t, "Europe/Berlin")
	bdb, b := srv.NewDB(t, "shop")
	allow := map[string]string{"MYSQL_ALLOW_DST_ZONE": "true"}

	t.Run("refused", func(t *testing.T) {
		_, err := openZoned(t, home.DSN, a.DSN, b+berlinDSN, "", nil)
		require.ErrorContains(t, err, "order source b: the session time zone observes daylight saving ("+berlinZone+")")
		require.ErrorContains(t, err, "mysql.allowDSTZone")
		_, err = openZoned(t, home.DSN, a.DSN, b, "", nil)
		require.NoError(t, err, "b's server runs in UTC; only the DSN's zone observes daylight saving")
	})
	t.Run("allowed", func(t *testing.T) {
		logged, err := openZoned(t, home.DSN, a.DSN, b+berlinDSN, "", allow)
		require.NoError(t, err)
		require.Contains(t, logged, `level=WARN msg="!!! THE SESSION TIME ZONE OF ORDER SOURCE b OBSERVES DAYLIGHT SAVING: `+
			`around each change orders close up to an hour early (spring) or late (autumn); mysql.allowDSTZone is true, `+
			`so the executor runs anyway (docs/time-zones.md)" source=b zone="`+berlinZone+`"`)
		require.Equal(t, 1, strings.Count(logged, "DAYLIGHT SAVING"), "a and mysql.dsn's sessions run in UTC:\n%s", logged)
	})
	t.Run("home's source", func(t *testing.T) {
		logged, err := openZoned(t, b+berlinDSN, a.DSN, b+berlinDSN, "", allow)
		require.NoError(t, err)
		require.Contains(t, logged, "!!! THE MYSQL SESSION TIME ZONE OBSERVES DAYLIGHT SAVING")
		require.Equal(t, 1, strings.Count(logged, "DAYLIGHT SAVING"), "b is on mysql.dsn's database:\n%s", logged)
	})
	t.Run("epoch", func(t *testing.T) {
		for _, db := range []*sqlx.DB{home.DB, a.DB, bdb} {
			epochForeignTables(t, db)
		}
		logged, err := openZoned(t, home.DSN, a.DSN, b+berlinDSN, ordertest.ForeignYAML,
			map[string]string{"ORDER_SCHEMA_TIME_UNIT": "epochMillis"})
		require.NoError(t, err)
		require.Contains(t, logged, `level=INFO msg="the session time zone of order source b observes daylight saving; `+
			`no matter for order.schema.timeUnit epochMillis: its orders are compared with the database clock's instant`)
		require.Contains(t, logged, `source=b zone="`+berlinZone+`"`)
		require.Equal(t, 1, strings.Count(logged, "observes daylight saving"), "a and mysql.dsn's sessions run in UTC:\n%s", logged)
	})
}

// epochForeignTables creates the foreign shop's tables in db with its
// times in epoch milliseconds.
func epochForeignTables(t *testing.T, db *sqlx.DB) {
	t.Helper()
	ordertest.ForeignTables(t, db)
	_, err := db.Exec(`ALTER TABLE t_order MODIFY created_at BIGINT NOT NULL, MODIFY updated_at BIGINT NULL,
		MODIFY cancel_time BIGINT NULL`)
	require.NoError(t, err)
}
