package mariadbtest

import (
	"context"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbserver"
)

// After LoadZone, a DSN's time_zone parameter may name the zone (quoted,
// its '/' escaped, as the driver reads parameters), and the session runs
// on that zone's clock: Berlin's, an hour ahead of UTC in January and two
// in July, while the server itself runs in UTC.
func TestLoadZone(t *testing.T) {
	t.Parallel()
	srv := Start(t, Options{})
	srv.LoadZone(t, "Europe/Berlin")
	db, err := sqlx.Open("mysql", srv.DSN("")+"&time_zone=%27Europe%2FBerlin%27")
	require.NoError(t, err)
	defer db.Close()
	z, err := dbserver.ReadSessionZone(context.Background(), db, 2026)
	require.NoError(t, err)
	require.Equal(t, "Europe/Berlin", z.Name)
	require.Equal(t, time.Hour, z.January)
	require.Equal(t, 2*time.Hour, z.July)
}
