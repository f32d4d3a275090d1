package orderdemo

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"
)

// ResetError is a demo Reset refused because a table it would empty
// holds a row the demo generator did not make.
type ResetError struct {
	Database string
	Table    string
	Row      string // the row's order_no, id or sku_id; "(any)" when no demo data was ever recorded
}

func (e *ResetError) Error() string {
	what := fmt.Sprintf("%s holds rows demo-data did not make (e.g. %s)", e.Table, e.Row)
	if e.Row == "(any)" {
		what = e.Table + " holds rows and demo-data never recorded any of its own here"
	}
	return fmt.Sprintf("refusing to reset database %q: %s, and a reset empties %s. "+
		"Nothing was changed. Use a database of its own for demo data, or, to empty these tables whatever they hold, "+
		"pass -reset-database %s", e.Database, what, strings.Join(demoTables, ", "), e.Database)
}

// prepareDemo makes the database ready for a demo batch: the Reset (after
// checking that it wipes only demo rows, or that ResetDatabase names this
// database), the marker table, and the check that the batch's SKUs are
// demo rows or absent, so no real stock row is ever added to.
func prepareDemo(ctx context.Context, db *sqlx.DB, spec Spec) error {
	var st store
	marker, err := st.demoBatchExists(ctx, db)
	if err != nil {
		return fmt.Errorf("demo data: %w", err)
	}
	if spec.Reset || spec.ResetDatabase != "" {
		dbName, err := st.demoDatabase(ctx, db)
		if err != nil {
			return fmt.Errorf("demo data: %w", err)
		}
		switch {
		case spec.ResetDatabase != "" && spec.ResetDatabase != dbName:
			return fmt.Errorf("demo data: -reset-database %q is not the database the DSN names (%q); nothing was changed", spec.ResetDatabase, dbName)
		case spec.ResetDatabase != "" && !spec.Reset:
			return fmt.Errorf("demo data: -reset-database is a confirmation for -reset, which is not set")
		case spec.ResetDatabase == "":
			for _, t := range slices.Backward(demoTables) { // order_info first: the clearest example
				row, err := st.demoForeign(ctx, db, t, marker)
				if err != nil {
					return fmt.Errorf("demo data: %w", err)
				}
				if row != "" {
					return &ResetError{Database: dbName, Table: t, Row: row}
				}
			}
		}
		if err := st.demoReset(ctx, db, marker); err != nil {
			return fmt.Errorf("demo data: %w", err)
		}
	}
	if !marker {
		if err := st.demoCreateBatch(ctx, db); err != nil {
			return fmt.Errorf("demo data: %w", err)
		}
	}
	sku, err := st.demoForeignStock(ctx, db, spec.SKUs)
	if err != nil {
		return fmt.Errorf("demo data: %w", err)
	}
	if sku != 0 {
		return fmt.Errorf("demo data: inventory has sku_id %d, which demo-data did not make, and demo orders would add stock to it; "+
			"nothing was changed. Use a database of its own for demo data (make demo uses order_job_demo)", sku)
	}
	return nil
}
