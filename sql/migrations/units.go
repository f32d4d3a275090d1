package migrations

import (
	"strings"

	orderschema "github.com/orderjob/executor/orders/schema"
)

// SourcesSetting is the Source of a problem of an order table that
// order.sources lists: the executor never creates or changes those tables,
// the fix is the DBA's.
const SourcesSetting = "order.sources"

// fixListedTables is the fix of a missing order or item table that
// order.sources lists (its item table follows the order table's suffix)
// when there is no table of the kind to copy.
const fixListedTables = "create it, or correct the order tables order.sources lists for this database " +
	"(each is order.schema.table with a suffix; its item table is order.schema.items.table with the same suffix)"

// shopProblems are declaredProblems of the configured shop. With
// Config.OrderTables the shop's order and item tables are the first
// unit's, named by order.sources, not by order.schema: a missing one is
// fixed in that list, so its fix says so.
func (m *Migrator) shopProblems(live schema) []Problem {
	probs := declaredProblems(m.cfg.Shop, live, m.cfg.GivebacksByEvents)
	if len(m.cfg.OrderTables) == 0 {
		return probs
	}
	for i, p := range probs {
		listed := p.Table == m.cfg.Shop.Orders.Table || p.Table == m.cfg.Shop.Items.Table
		if listed && p.tableMissing() {
			probs[i].Fix = fixListedTables
		}
	}
	return probs
}

// tableMissing reports whether p is a missing table (newTableCheck's
// problem), whose fix the order sources' checks rewrite.
func (p Problem) tableMissing() bool { return p.Object == "table "+p.Table && p.Detail == "is missing" }

// unitTables lists the order and item tables of Config.OrderTables other
// than the schema's own (checked as the executor's or the declared ones).
func (m *Migrator) unitTables() [][2]string {
	var out [][2]string
	for _, t := range m.cfg.OrderTables {
		if strings.EqualFold(t, m.cfg.Shop.Orders.Table) || strings.EqualFold(t, m.units.Orders.Table) {
			continue // checked as the executor's own or the declared one
		}
		u, err := m.units.ForTable(t)
		if err != nil {
			continue // the configuration's loader refused it already
		}
		out = append(out, [2]string{u.Orders.Table, u.Items.Table})
	}
	return out
}

// unitProblems checks each unit table of Config.OrderTables in live as the
// schema's order and item tables are checked: a declared schema's needs
// with the unit's tables, or the executor's own order_info and order_item
// definitions. Every problem names the unit's table and carries the
// statement that fixes it, since migrate never changes these tables.
func (m *Migrator) unitProblems(live schema) []Problem {
	var probs []Problem
	for _, u := range m.unitTables() {
		if m.cfg.Shop.Declared {
			sch, _ := m.units.ForTable(u[0]) // unitTables checked it
			like := map[string]string{u[0]: m.cfg.Shop.Orders.Table, u[1]: m.cfg.Shop.Items.Table}
			for _, p := range declaredProblems(sch, live, m.cfg.GivebacksByEvents) {
				if like[p.Table] == "" {
					continue // a table the units share, checked with the declared ones
				}
				if p.tableMissing() {
					p.Fix = "CREATE TABLE " + p.Table + " LIKE " + like[p.Table]
					if live[strings.ToLower(like[p.Table])] == nil {
						p.Fix = fixListedTables // nothing to copy: a wrong list more likely
					}
				}
				probs = append(probs, p)
			}
			continue
		}
		def := orderschema.Default()
		for i, own := range []string{def.Orders.Table, def.Items.Table} {
			probs = append(probs, unitTableProblems(m.want[own], u[i], live)...)
		}
	}
	for i := range probs {
		probs[i].Source = SourcesSetting
	}
	return probs
}

// unitTableProblems compares the unit table name in live with want, the
// executor's definition of the table it stands for.
func unitTableProblems(want *table, name string, live schema) []Problem {
	have := live[strings.ToLower(name)]
	if have == nil {
		return []Problem{{Table: name, Object: "table " + name, Detail: "is missing",
			Fix: "CREATE TABLE " + name + " LIKE " + want.Name}}
	}
	w := want.clone()
	w.Name = name
	adds, probs := reconcile(w, have)
	for _, c := range adds {
		obj := "column " + c.Column.Name
		if c.Kind == addIndex {
			obj = "index " + c.Index.Name
		}
		probs = append(probs, Problem{Table: name, Object: obj, Detail: "is missing", Fix: "ALTER TABLE " + name + " " + c.SQL})
	}
	return probs
}
