package migrations

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	orderschema "github.com/orderjob/executor/orders/schema"
)

// SkippedFor is what the history records a step was skipped for: the
// setting that declares the shop's own tables.
const SkippedFor = "order.schema"

// shopTables are the tables that belong to the shop once it declares its
// schema: those of the executor's default schema (order_info, order_item,
// inventory, user_coupon: the steps creating and widening them are what a
// declaration skips) and the declared ones. Nil when nothing is declared.
func shopTables(sch orderschema.Schema) map[string]bool {
	if !sch.Declared {
		return nil
	}
	out := map[string]bool{}
	for _, n := range append(declaredTables(orderschema.Default()), declaredTables(sch)...) {
		out[strings.ToLower(n)] = true // as the steps' tables are
	}
	return out
}

// declaredTables lists the tables sch names, as named (a server with
// case-sensitive table names finds them only so), each once.
func declaredTables(sch orderschema.Schema) []string {
	names := []string{sch.Orders.Table, sch.Items.Table}
	if sch.Stock != nil {
		names = append(names, sch.Stock.Table)
	}
	if sch.Coupon != nil {
		names = append(names, sch.Coupon.Table)
	}
	for _, g := range sch.Extra {
		names = append(names, g.Table)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// skips reports whether step s is one a declaration skips: one of its
// statements touches a shop table. (No step touches both the shop's
// tables and the executor's own: a test keeps it so.)
func (m *Migrator) skips(s Migration) bool {
	if m.shop == nil {
		return false
	}
	for _, st := range s.parsed {
		if m.shop[st.Table] || m.shop[st.NewName] {
			return true
		}
	}
	return false
}

// needed is the schema the executor relies on here: every table the steps
// define, less the shop's when it declares its own.
func (m *Migrator) needed() schema {
	if m.shop == nil {
		return m.want
	}
	own := schema{}
	for name, t := range m.want {
		if !m.shop[name] {
			own[name] = t
		}
	}
	return own
}

// checkShopConfig refuses a declaration naming one of the executor's own
// tables (migrate would create it as the executor's and the close would
// write the shop's orders into it), and -run-skipped with a declaration.
func (m *Migrator) checkShopConfig() error {
	if !m.cfg.Shop.Declared {
		return nil
	}
	if m.cfg.RunSkipped {
		return fmt.Errorf("migrations: -run-skipped runs the steps that create the executor's own order tables, " +
			"but order.schema still declares the shop's: remove the declaration first")
	}
	defaults := declaredTables(orderschema.Default())
	for _, n := range declaredTables(m.cfg.Shop) {
		l := strings.ToLower(n)
		if _, ours := m.want[l]; ours && !slices.Contains(defaults, l) {
			return fmt.Errorf("migrations: order.schema names %s, one of the executor's own tables: name the shop's table", n)
		}
	}
	return nil
}

// recordSkips records the steps a declaration skips, giving an older
// history table its skipped_for column first.
func (m *Migrator) recordSkips(ctx context.Context, conn *sql.Conn, p *plan) error {
	if len(p.skip) == 0 {
		return nil
	}
	out := m.cfg.Out
	if p.historyExists && !p.historySkipped {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf(addSkippedSQL, m.cfg.Table)); err != nil {
			return fmt.Errorf("migrations: add skipped_for to %s: %w", m.cfg.Table, err)
		}
	}
	for _, s := range p.skip {
		if err := recordSkipped(ctx, conn, m.cfg.Table, s, SkippedFor); err != nil {
			return fmt.Errorf("migrations: %w", err)
		}
		fmt.Fprintf(out, "%s: skipped (order.schema declares the shop's tables; this step would change %s)\n",
			s.ID(), strings.Join(stepTables(s), ", "))
	}
	return nil
}

// stepTables lists the tables a step touches.
func stepTables(s Migration) []string {
	return tableNames([]Migration{s})
}

// SkippedError is a migration refused because steps were skipped for a
// declaration that is gone: running them now would create or change the
// shop's order tables, which needs the operator's word (-run-skipped).
type SkippedError struct {
	Steps []historyRow
}

func (e *SkippedError) Error() string {
	ids := make([]string, len(e.Steps))
	for i, s := range e.Steps {
		ids[i] = fmt.Sprintf("%04d_%s", s.Version, s.Name)
	}
	return fmt.Sprintf("%d steps were skipped for %s (%s), which declares nothing now: they create and change the order tables "+
		"order_info, order_item, inventory and user_coupon. Restore order.schema to keep the shop's tables as they are, "+
		"or run `executor migrate -run-skipped` to use the executor's own order tables", len(ids), e.Steps[0].SkippedFor, strings.Join(ids, ", "))
}
