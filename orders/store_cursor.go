package orders

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
	"github.com/orderjob/executor/orders/closesql"
)

// This file runs the SQL of the capped runs' cursors (order_close_cursor;
// the statements are in package closesql): one row per order table and
// shard, a hint where the next capped run of that shard resumes.

// cursorShardRule is the shard_rule of the cursors this code saves and
// reads: 1, internal/shard's hash (0 was id % total, whose positions mean
// nothing under the hash: such a cursor is ignored and overwritten).
const cursorShardRule = 1

func (store) closeCursor(ctx context.Context, q sqlx.QueryerContext, table string, shardIndex, shardTotal int) (scanCursor, bool, error) {
	var row struct {
		CreateTime time.Time `db:"create_time"`
		ID         int64     `db:"order_id"`
	}
	err := sqlexec.GetNamed(ctx, q, &row, closesql.CloseCursor, map[string]any{"order_table": table, "shard_total": shardTotal,
		"shard_index": shardIndex, "shard_rule": cursorShardRule})
	if errors.Is(err, sql.ErrNoRows) {
		return scanCursor{}, false, nil
	}
	if err != nil {
		return scanCursor{}, false, fmt.Errorf("read where shard %d/%d of %s resumes: %w", shardIndex, shardTotal, table, err)
	}
	return scanCursor{CreateTime: row.CreateTime, ID: row.ID}, true, nil
}

func (store) setCloseCursor(ctx context.Context, e sqlx.ExecerContext, table string, shardIndex, shardTotal int, cur *scanCursor) error {
	var err error
	p := map[string]any{"order_table": table, "shard_total": shardTotal, "shard_index": shardIndex}
	if cur == nil {
		_, err = sqlexec.ExecNamed(ctx, e, closesql.ClearCloseCursor, p)
	} else {
		p["create_time"], p["order_id"], p["shard_rule"] = cur.CreateTime, cur.ID, cursorShardRule
		_, err = sqlexec.ExecNamed(ctx, e, closesql.SetCloseCursor, p)
	}
	if err != nil {
		return fmt.Errorf("record where shard %d/%d of %s resumes: %w", shardIndex, shardTotal, table, err)
	}
	return nil
}
