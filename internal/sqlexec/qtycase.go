package sqlexec

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// QtyCase renders `CASE WHEN key IN (...) THEN q ... END` for qty (a
// quantity per key, such as a stock change per SKU), one branch per
// distinct quantity, keys ascending within a branch. Quantities repeat a
// lot (most SKUs of a page move 1-3 units), so a page's ~1,000 SKUs make a
// handful of branches, and MySQL tests a constant IN list by binary
// search: each row costs a few lookups, not a walk over 1,000
// `WHEN sku_id = ?` branches. key is a column name from the code or a
// checked schema, never input; the values are int64 literals.
func QtyCase(key string, qty map[int64]int64) string {
	byQty := map[int64][]int64{}
	for _, k := range slices.Sorted(maps.Keys(qty)) {
		byQty[qty[k]] = append(byQty[qty[k]], k)
	}
	var b strings.Builder
	b.WriteString("CASE")
	for _, q := range slices.Sorted(maps.Keys(byQty)) {
		b.WriteString(" WHEN ")
		b.WriteString(key)
		b.WriteString(" IN (")
		b.WriteString(IntList(byQty[q]))
		b.WriteString(") THEN ")
		b.WriteString(strconv.FormatInt(q, 10))
	}
	b.WriteString(" END")
	return b.String()
}
