package orders

// MarkDeliveredSQL exposes the relay's fenced "done" write, so a test can
// show a dead relay's claim marks nothing.
const MarkDeliveredSQL = markDeliveredSQL
