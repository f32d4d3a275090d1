package shard

// Share is what one executor of a broadcast run takes of one unit (an
// order table of one source): every row (RowTotal 1), or the rows whose
// Of(id, RowTotal) is RowIndex.
type Share struct {
	Unit               int // index into the run's units
	RowIndex, RowTotal int
}

// Whole reports whether the share is the whole unit.
func (s Share) Whole() bool { return s.RowTotal <= 1 }

// Assign returns the shares of executor index among total executors over
// units units, in unit order. Each executor first takes whole units in
// turn (unit u goes to executor u % total), as many as every executor
// can take the same number of (units / total each); the units left over,
// fewer than the executors, are split by rows among all of them with Of.
// So with units of similar size every executor gets the same work, also
// when the counts do not divide (6 units over 4 executors: one whole unit
// and a quarter of each of the two left each), and no row is in two
// shares. total <= 1 (no broadcast) takes every unit whole; an index
// outside [0, total) takes nothing.
func Assign(units, index, total int) []Share {
	total = max(total, 1)
	if index < 0 || index >= total || units <= 0 {
		return nil
	}
	whole := units / total * total // units handed out whole
	var out []Share
	for u := 0; u < units; u++ {
		switch {
		case u < whole && u%total == index:
			out = append(out, Share{Unit: u, RowIndex: 0, RowTotal: 1})
		case u >= whole:
			out = append(out, Share{Unit: u, RowIndex: index, RowTotal: total})
		}
	}
	return out
}
