package inspect

// SummaryCap is summaryCap, for the tests of the cap.
const SummaryCap = summaryCap
