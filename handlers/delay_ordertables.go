package handlers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/orderjob/executor/delay"
)

// OrderCloseTables are the order tables whose orders the orderTimeoutClose
// tasks of one database close: the database's units (order.sources), each
// with its batch close. A task's payload names its table ("table");
// one without (every task registered before payloads named one) means
// Default.
type OrderCloseTables struct {
	// Default is the table of a task whose payload names none:
	// order.schema.table.
	Default string
	// Close is each table's batch close (DelayOrderCloseBatch over that
	// table's Closer).
	Close map[string]delay.BatchHandlerFunc
}

// table is the order table of a parsed payload, and an error unless the
// database holds it.
func (ot OrderCloseTables) table(p delay.OrderTimeoutPayload) (string, error) {
	table := cmp.Or(p.Table, ot.Default)
	if _, ok := ot.Close[table]; ok {
		return table, nil
	}
	known := strings.Join(slices.Sorted(maps.Keys(ot.Close)), ", ")
	if p.Table == "" {
		return "", &delay.InvalidError{Field: "payload.table",
			Msg: fmt.Sprintf("is required: this database has no order table %s, the default (its order tables: %s)", ot.Default, known)}
	}
	return "", &delay.InvalidError{Field: "payload.table",
		Msg: fmt.Sprintf("%s is not an order table of this database (its order tables: %s)", p.Table, known)}
}

// Validate is the dispatcher's payload validator of orderTimeoutClose
// (delay.Config.PayloadValidators): ValidateOrderPayload, and the table is
// one of the database's, so a task that could never close its order is
// refused at registration.
func (ot OrderCloseTables) Validate(payload json.RawMessage) error {
	p, err := parseOrderPayload(payload)
	if err != nil {
		return err
	}
	_, err = ot.table(p)
	return err
}

// DelayOrderCloseTables is the orderTimeoutClose batch handler of a
// database holding the order tables ot: the claimed tasks are grouped by
// their payload's table and each group is closed by that table's batch
// close, the tables one after the other (the dispatcher already runs
// batches side by side). A task whose table the database does not hold
// FAILS without being sent, as one whose payload does not parse.
func DelayOrderCloseTables(ot OrderCloseTables) delay.BatchHandlerFunc {
	return func(ctx context.Context, tasks []*delay.Task) []error {
		errs := make([]error, len(tasks))
		groups := map[string][]int{} // task indexes by table
		var order []string
		for i, t := range tasks {
			p, err := parseOrderPayload(t.Payload)
			var table string
			if err == nil {
				table, err = ot.table(p)
			}
			if err != nil {
				errs[i] = delay.Permanent(err)
				continue
			}
			if _, seen := groups[table]; !seen {
				order = append(order, table)
			}
			groups[table] = append(groups[table], i)
		}
		for _, table := range order {
			idx := groups[table]
			group := make([]*delay.Task, len(idx))
			for k, i := range idx {
				group[k] = tasks[i]
			}
			res := ot.Close[table](ctx, group)
			for k, i := range idx {
				if k < len(res) {
					errs[i] = res[k]
				} else {
					errs[i] = errors.New("no result from the close of its table")
				}
			}
		}
		return errs
	}
}
