package dbserver

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// SessionZone is the MySQL session's time zone as the server applies it.
// create_time and NOW() are zone-less wall clocks of this zone (see orders'
// package doc), so a zone with daylight saving makes one wall-clock hour
// happen twice in autumn and never in spring: orders placed around the
// change close up to an hour late or early.
type SessionZone struct {
	// Name is @@session.time_zone: "SYSTEM", an offset such as "+08:00", or
	// a zone name. System is @@system_time_zone, what SYSTEM means. Names
	// are for messages only: "CET" or "SYSTEM" say nothing reliable about
	// daylight saving.
	Name, System string
	// January and July are the session's offsets from UTC at noon UTC on
	// 15 January and 15 July of the year asked for, computed by the server.
	January, July time.Duration
}

// ObservesDST reports whether the zone's offset changes over the year (in
// either hemisphere).
func (z SessionZone) ObservesDST() bool { return z.January != z.July }

// String describes the zone for an operator.
func (z SessionZone) String() string {
	name := z.Name
	if name == "SYSTEM" {
		name = "SYSTEM (" + z.System + ")"
	}
	return fmt.Sprintf("time_zone=%s: UTC%s in January, UTC%s in July", name, offset(z.January), offset(z.July))
}

func offset(d time.Duration) string {
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	return fmt.Sprintf("%s%02d:%02d", sign, int(d.Hours()), int(d.Minutes())%60)
}

// ReadSessionZone asks the server for the session time zone's offsets in
// January and July of year. It relies on the server's own conversion
// (FROM_UNIXTIME), so it sees what the close job's NOW() sees, whether the
// zone comes from the server's zone tables or from the operating system's.
func ReadSessionZone(ctx context.Context, q sqlx.QueryerContext, year int) (SessionZone, error) {
	jan := time.Date(year, time.January, 15, 12, 0, 0, 0, time.UTC).Unix()
	jul := time.Date(year, time.July, 15, 12, 0, 0, 0, time.UTC).Unix()
	return store{}.sessionZone(ctx, q, jan, jul)
}
