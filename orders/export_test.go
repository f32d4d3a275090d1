package orders

// ScanPageSQL exposes the scan statement to the EXPLAIN test.
const ScanPageSQL = scanPageSQL

// LetterStatesSQL exposes the dead-letter probe to the EXPLAIN test.
const LetterStatesSQL = letterStatesSQL
