package orders

// ScanPageSQL exposes the scan statement to the EXPLAIN test.
const ScanPageSQL = scanPageSQL

// BlockedSQL exposes the dead-letter probe to the EXPLAIN test.
const BlockedSQL = blockedSQL
