package schema

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// maxPatternTables bounds what one pattern expands to: a typo such as
// {0..100000} is refused rather than opening a hundred thousand units.
const maxPatternTables = 4096

// tablePattern is a table name with one numeric range, t_order_{0..15}.
var tablePattern = regexp.MustCompile(`^([^{}]*)\{(\d+)\.\.(\d+)\}([^{}]*)$`)

// ExpandTables turns the order tables of a source, as configured, into
// names: each entry a plain table name or a pattern with one range
// (t_order_{0..15} is t_order_0 ... t_order_15; {00..15} pads to the
// width written). Every name is checked, and none may appear twice.
func ExpandTables(entries []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, e := range entries {
		names, err := expandOne(strings.TrimSpace(e))
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			if !identifier.MatchString(n) {
				return nil, fmt.Errorf("table %q is not a plain table name (letters, digits, '_', '$'; at most 64)", n)
			}
			if seen[n] {
				return nil, fmt.Errorf("table %s is listed twice", n)
			}
			seen[n] = true
			out = append(out, n)
		}
	}
	return out, nil
}

func expandOne(e string) ([]string, error) {
	if !strings.ContainsAny(e, "{}") {
		return []string{e}, nil
	}
	m := tablePattern.FindStringSubmatch(e)
	if m == nil {
		return nil, fmt.Errorf("table pattern %q: write one range as prefix{FROM..TO}suffix, e.g. t_order_{0..15}", e)
	}
	from, err1 := strconv.Atoi(m[2])
	to, err2 := strconv.Atoi(m[3])
	switch {
	case err1 != nil || err2 != nil || from > to:
		return nil, fmt.Errorf("table pattern %q: the range must go up (FROM <= TO)", e)
	case to-from+1 > maxPatternTables:
		return nil, fmt.Errorf("table pattern %q: %d tables, more than %d", e, to-from+1, maxPatternTables)
	}
	width := 0
	if len(m[2]) > 1 && m[2][0] == '0' {
		width = len(m[2]) // {00..15}: zero-padded
	}
	names := make([]string, 0, to-from+1)
	for n := from; n <= to; n++ {
		names = append(names, fmt.Sprintf("%s%0*d%s", m[1], width, n, m[4]))
	}
	return names, nil
}

// ForTable returns s with table as its order table and the item table
// following it by the same suffix: with order table t_order and item
// table t_order_item, the unit t_order_3 reads its lines from
// t_order_item_3. A table that does not start with s's order table name
// has no suffix to follow and is refused.
func (s Schema) ForTable(table string) (Schema, error) {
	suffix, ok := strings.CutPrefix(table, s.Orders.Table)
	if !ok {
		return Schema{}, fmt.Errorf("table %s does not start with the order table's name %s (order.schema.table): the item table follows the suffix after it", table, s.Orders.Table)
	}
	items := s.Items.Table + suffix
	if !identifier.MatchString(items) {
		return Schema{}, fmt.Errorf("table %s: its item table %s is not a plain table name (at most 64 characters)", table, items)
	}
	s.Orders.Table, s.Items.Table = table, items
	return s, nil
}
