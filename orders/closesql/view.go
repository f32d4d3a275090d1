package closesql

import (
	"fmt"
	"strings"

	"github.com/orderjob/executor/orders/schema"
)

// ViewStatements are the operators' order view's reads (orders/inspect) of
// a declared schema's tables, rendered with the same names as the close's
// statements: one order, its lines, its stock rows and its coupon rows.
// None locks. A column the schema does not name comes back NULL.
type ViewStatements struct {
	// Order reads one order by its number (bound): id, order_no, user_id,
	// the status as text, create_time, timeout_minutes (a declared
	// dueTime as create_time with timeout 0, see timeCol), close_time,
	// close_reason, update_time, and coupon_id as the close knows it (see
	// couponCol). With a soft delete (schema.SoftDelete) it also reads the
	// column as text, soft_delete, and soft_delete_live, 1 when the row
	// is live by the condition the close repeats (a NULL in a column whose
	// live value is a value is not live), else 0; without one it reads
	// neither. Zero or one row.
	Order string
	// Items reads the order's lines through the item index: sku_id and
	// quantity, by the order's number or id (bound, Schema.Items.ByID).
	Items string
	// Stock reads the stock rows of the bound keys (sqlx.In): sku_id, then
	// each declared stock column in turn. Empty without a stock table.
	Stock string
	// Coupon reads the order's coupon rows: id, status as text and
	// order_no; by id the row of the bound coupon id, by match the rows
	// matching the order of the bound order id. Empty without a coupon
	// table.
	Coupon string
}

// RenderView renders s's order view statements, after checking it.
func RenderView(s schema.Schema) (*ViewStatements, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("order schema: %w", err)
	}
	r := renderer{s: s}
	o, it := s.Orders, s.Items
	opt := func(name, alias string) string {
		if name == "" {
			return "NULL AS " + alias
		}
		return r.sel("", name, alias)
	}
	optTime := func(name, alias string) string {
		if name == "" || !o.TimeUnit.Epoch() {
			return opt(name, alias)
		}
		return r.timeOut(r.n(name)) + " AS " + alias
	}
	v := &ViewStatements{}
	cols := []string{r.sel("", o.ID, "id"), r.sel("", o.OrderNo, "order_no"),
		opt(o.User, "user_id"), "CAST(" + r.n(o.Status) + " AS CHAR) AS status", r.timeCol(""),
		r.timeoutCol(""), optTime(o.CloseTime, "close_time"), opt(o.CloseReason, "close_reason"),
		optTime(o.UpdateTime, "update_time"), r.couponCol("")}
	if live := r.live(""); live != "" {
		// The operator sees the value and the close's own verdict on it,
		// so a deleted order left unpaid past its deadline is explained.
		cols = append(cols, "CAST("+r.n(o.SoftDelete.Column)+" AS CHAR) AS soft_delete", "IF("+live+", 1, 0) AS soft_delete_live")
	}
	v.Order = "\nSELECT " + strings.Join(cols, ", ") + "\nFROM " + r.n(o.Table) + " WHERE " + r.n(o.OrderNo) + " = ?"
	v.Items = "SELECT " + r.sel("", it.SKU, "sku_id") + ", " + r.sel("", it.Quantity, "quantity") + " FROM " + r.n(it.Table) +
		" FORCE INDEX (" + r.n(it.Index) + ") WHERE " + r.n(it.OrderColumn) + " = ? ORDER BY " + r.n(it.SKU)
	if st := s.Stock; st != nil {
		cols := []string{r.sel("", st.Key, "sku_id")}
		for _, c := range st.Columns {
			cols = append(cols, r.n(c.Name))
		}
		hint := ""
		if st.Index != "" {
			hint = " FORCE INDEX (" + r.n(st.Index) + ")"
		}
		v.Stock = "SELECT " + strings.Join(cols, ", ") + " FROM " + r.n(st.Table) + hint +
			" WHERE " + r.n(st.Key) + " IN (?) ORDER BY " + r.n(st.Key)
	}
	if c := s.Coupon; c != nil {
		v.Coupon = r.viewCoupon()
	}
	return v, nil
}

// viewCoupon reads the order's coupon rows (ViewStatements.Coupon).
func (r renderer) viewCoupon() string {
	c, o := r.s.Coupon, r.s.Orders
	if !c.ByMatch() {
		orderNo := "NULL AS order_no"
		if c.OrderNo != "" {
			orderNo = r.sel("", c.OrderNo, "order_no")
		}
		return "SELECT CAST(" + r.n(c.ID) + " AS CHAR) AS id, CAST(" + r.n(c.Status) + " AS CHAR) AS status, " + orderNo +
			" FROM " + r.n(c.Table) + " WHERE " + r.n(c.ID) + " = ?"
	}
	return "SELECT NULL AS id, CAST(h." + r.n(c.Status) + " AS CHAR) AS status, NULL AS order_no FROM " + r.couponJoin() +
		" WHERE o." + r.n(o.ID) + " = ?"
}
