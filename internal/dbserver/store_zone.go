package dbserver

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// store runs the package's statements (docs/development.md, "Store code").
type store struct{}

// sessionZoneSQL reads the session time zone and its offsets from UTC at two
// instants, each given twice (seconds since the epoch: a for off_a, b for
// off_b; positional, as the epoch literal's colons would read as names).
// The offset at t is the
// session's wall clock at t (FROM_UNIXTIME converts through the session
// zone) minus UTC's (the epoch plus t seconds, no zone involved). No locks,
// no tables.
const sessionZoneSQL = `
SELECT @@session.time_zone AS name, @@system_time_zone AS system_zone,
  TIMESTAMPDIFF(SECOND, TIMESTAMP'1970-01-01 00:00:00' + INTERVAL ? SECOND, FROM_UNIXTIME(?)) AS off_a,
  TIMESTAMPDIFF(SECOND, TIMESTAMP'1970-01-01 00:00:00' + INTERVAL ? SECOND, FROM_UNIXTIME(?)) AS off_b`

func (store) sessionZone(ctx context.Context, q sqlx.QueryerContext, a, b int64) (SessionZone, error) {
	var r struct {
		Name   string `db:"name"`
		System string `db:"system_zone"`
		OffA   int64  `db:"off_a"`
		OffB   int64  `db:"off_b"`
	}
	if err := sqlx.GetContext(ctx, q, &r, sessionZoneSQL, a, a, b, b); err != nil {
		return SessionZone{}, fmt.Errorf("read the session time zone: %w", err)
	}
	return SessionZone{Name: r.Name, System: r.System,
		January: time.Duration(r.OffA) * time.Second, July: time.Duration(r.OffB) * time.Second}, nil
}
