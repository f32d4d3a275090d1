package orders

import "time"

// ShiftClock makes c read the database's clock d later, so orders placed
// now are due for it without waiting for their timeout.
func ShiftClock(c *Closer, d time.Duration) *Closer {
	c.shift = d
	return c
}

// ScanPageSQL exposes the scan statement to the EXPLAIN test.
const ScanPageSQL = scanPageSQL

// LetterStatesSQL exposes the dead-letter probe to the EXPLAIN test.
const LetterStatesSQL = letterStatesSQL
