package dbserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/mariadbtest"
)

// The zone is judged by the offsets the server computes, not by its name:
// the shared server runs in UTC; a private one started under
// TZ=Europe/Berlin reports SYSTEM (CET) and is an hour further ahead in July.
func TestReadSessionZone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	z, err := dbserver.ReadSessionZone(ctx, dbtest.NewEmpty(t), 2026)
	require.NoError(t, err)
	require.False(t, z.ObservesDST(), "the shared server runs in UTC: %s", z)

	srv := mariadbtest.Start(t, mariadbtest.Options{Env: []string{"TZ=Europe/Berlin"}})
	open := func(dsn string) *sqlx.DB {
		db, err := sqlx.Open("mysql", dsn)
		require.NoError(t, err)
		t.Cleanup(func() { db.Close() })
		return db
	}
	z, err = dbserver.ReadSessionZone(ctx, open(srv.DSN("")), 2026)
	require.NoError(t, err)
	require.Equal(t, time.Hour, z.January, "the private server must really run in Europe/Berlin (the OS's zoneinfo): %s", z)
	require.Equal(t, 2*time.Hour, z.July, "%s", z)
	require.True(t, z.ObservesDST())
	require.Equal(t, "SYSTEM", z.Name)
	require.Equal(t, "time_zone=SYSTEM (CET): UTC+01:00 in January, UTC+02:00 in July", z.String())

	// A fixed offset on the same server never changes.
	z, err = dbserver.ReadSessionZone(ctx, open(srv.DSN("")+"&time_zone=%27%2B01%3A00%27"), 2026)
	require.NoError(t, err)
	require.False(t, z.ObservesDST(), "%s", z)
	require.Equal(t, time.Hour, z.July)
	require.Equal(t, "+01:00", z.Name)
}
