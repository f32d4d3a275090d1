package config

import (
	"errors"
	"fmt"
	"strings"

	"github.com/orderjob/executor/internal/suggest"

	"github.com/orderjob/executor/orders/schema"
)

// Schema is the order data order.schema describes: the executor's own
// schema when no table is named, else the shop's, checked.
func (s OrderSchema) Schema() (schema.Schema, error) {
	if s.Table == "" {
		if s.SoftDelete != (OrderSchemaSoftDelete{}) {
			// Silently ignored, it would close the orders the operator
			// meant to keep.
			return schema.Schema{}, errors.New("softDelete: the executor's own order_info has no soft delete; " +
				"name the shop's order table in order.schema.table, or leave softDelete out")
		}
		return schema.Default(), nil
	}
	var errs []error
	value := func(key, v string) schema.Value {
		val, err := schema.ParseValue(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
		}
		return val
	}
	out := schema.Schema{Declared: true,
		Orders: schema.Orders{Table: s.Table, ScanIndex: s.ScanIndex, ID: s.ID, OrderNo: s.OrderNo, User: s.User,
			Status: s.Status, CreateTime: s.CreateTime, Unpaid: value("unpaid", s.Unpaid), Closed: value("closed", s.Closed),
			TimeoutColumn: s.TimeoutColumn, TimeoutMinutes: s.TimeoutMinutes, DueTime: s.DueTime,
			CloseTime: s.CloseTime, UpdateTime: s.UpdateTime, CloseReason: s.CloseReason},
		Items: schema.Items{Table: s.Items.Table, Index: s.Items.Index, OrderColumn: s.Items.OrderColumn,
			SKU: s.Items.SKU, Quantity: s.Items.Quantity},
	}
	out.Orders.SoftDelete = s.SoftDelete.parse(func(err error) { errs = append(errs, err) })
	if u, ok := schema.ParseTimeUnit(s.TimeUnit); ok || s.TimeUnit == "" {
		out.Orders.TimeUnit = u
	} else {
		errs = append(errs, fmt.Errorf("timeUnit: %q is none of %s%s", s.TimeUnit, strings.Join(schema.TimeUnits, ", "),
			didYouMeanValue(s.TimeUnit, schema.TimeUnits)))
	}
	switch s.Items.OrderKey {
	case "orderNo":
	case "id":
		out.Items.ByID = true
	default:
		errs = append(errs, fmt.Errorf("items.orderKey: %q is neither orderNo nor id", s.Items.OrderKey))
	}
	if st := s.Stock; st.Table != "" {
		out.Stock = &schema.Stock{Table: st.Table, Key: st.Key, Index: st.Index}
		for _, c := range st.Columns {
			col, err := schema.ParseStockColumn(c)
			if err != nil {
				errs = append(errs, fmt.Errorf("stock.columns: %w", err))
			}
			out.Stock.Columns = append(out.Stock.Columns, col)
		}
	}
	if c := s.Coupon; c.Table != "" {
		out.Coupon = &schema.Coupon{Table: c.Table, Status: c.Status, Used: value("coupon.used", c.Used),
			Unused: value("coupon.unused", c.Unused), OrderColumn: c.OrderColumn, ID: c.ID, OrderNo: c.OrderNo, Index: c.Index,
			Optional: c.Optional, AnyCopy: c.AnyCopy}
		for _, m := range c.Match {
			p, err := schema.ParsePair(m)
			if err != nil {
				errs = append(errs, fmt.Errorf("coupon.match: %w", err))
			}
			out.Coupon.Match = append(out.Coupon.Match, p)
		}
	}
	for _, g := range s.Givebacks {
		gb, err := schema.ParseGiveback(g)
		if err != nil {
			errs = append(errs, fmt.Errorf("givebacks: %w", err))
			continue
		}
		out.Extra = append(out.Extra, gb)
	}
	if err := out.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return schema.Schema{}, err
	}
	return out, nil
}

// didYouMeanValue is "; did you mean epochMillis?" when v is a near miss
// of one of names, else "".
func didYouMeanValue(v string, names []string) string {
	if guess := suggest.Closest(v, names); guess != "" {
		return "; did you mean " + guess + "?"
	}
	return ""
}

// parse reads the soft-delete column and its live value, reporting to bad
// what cannot be read.
func (d OrderSchemaSoftDelete) parse(bad func(error)) schema.SoftDelete {
	out := schema.SoftDelete{Column: strings.TrimSpace(d.Column)}
	v := strings.TrimSpace(d.LiveValue)
	switch {
	case v == "", strings.EqualFold(v, "null"):
		// NULL is live. YAML reads a bare NULL as no value; the
		// environment's NULL means the same, not the text 'NULL' (which
		// no deleted_at holds: every order would count as deleted).
	default:
		live, err := schema.ParseValue(v)
		if err != nil {
			bad(fmt.Errorf("softDelete.liveValue: %w", err))
		}
		out.Live = live
	}
	return out
}
