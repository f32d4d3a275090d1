package orders

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
)

// This file holds the SQL of the capped runs' cursors (order_close_cursor):
// one row per order table and shard, a hint where the next capped run of
// that shard resumes.

// cursorShardRule is the shard_rule of the cursors this code saves and
// reads: 1, internal/shard's hash (0 was id % total, whose positions mean
// nothing under the hash: such a cursor is ignored and overwritten).
const cursorShardRule = 1

// closeCursorSQL reads where the next capped run of the shard of a unit's
// order table starts.
// A primary-key lookup; zero or one row (none when the saved one is of
// another shard rule).
const closeCursorSQL = `
SELECT create_time, order_id FROM order_close_cursor
WHERE order_table = :order_table AND shard_total = :shard_total AND shard_index = :shard_index AND shard_rule = :shard_rule`

func (store) closeCursor(ctx context.Context, q sqlx.QueryerContext, table string, shardIndex, shardTotal int) (scanCursor, bool, error) {
	var row struct {
		CreateTime time.Time `db:"create_time"`
		ID         int64     `db:"order_id"`
	}
	err := sqlexec.GetNamed(ctx, q, &row, closeCursorSQL, map[string]any{"order_table": table, "shard_total": shardTotal,
		"shard_index": shardIndex, "shard_rule": cursorShardRule})
	if errors.Is(err, sql.ErrNoRows) {
		return scanCursor{}, false, nil
	}
	if err != nil {
		return scanCursor{}, false, fmt.Errorf("read where shard %d/%d of %s resumes: %w", shardIndex, shardTotal, table, err)
	}
	return scanCursor{CreateTime: row.CreateTime, ID: row.ID}, true, nil
}

// setCloseCursorSQL records where the shard's next capped run starts;
// clearCloseCursorSQL makes it start at the head. One row by primary key.
const (
	setCloseCursorSQL = `
INSERT INTO order_close_cursor (order_table, shard_total, shard_index, shard_rule, create_time, order_id, updated_at)
VALUES (:order_table, :shard_total, :shard_index, :shard_rule, :create_time, :order_id, UTC_TIMESTAMP(3))
ON DUPLICATE KEY UPDATE shard_rule = VALUES(shard_rule), create_time = VALUES(create_time), order_id = VALUES(order_id),
  updated_at = VALUES(updated_at)`
	clearCloseCursorSQL = `DELETE FROM order_close_cursor
WHERE order_table = :order_table AND shard_total = :shard_total AND shard_index = :shard_index`
)

func (store) setCloseCursor(ctx context.Context, e sqlx.ExecerContext, table string, shardIndex, shardTotal int, cur *scanCursor) error {
	var err error
	p := map[string]any{"order_table": table, "shard_total": shardTotal, "shard_index": shardIndex}
	if cur == nil {
		_, err = sqlexec.ExecNamed(ctx, e, clearCloseCursorSQL, p)
	} else {
		p["create_time"], p["order_id"], p["shard_rule"] = cur.CreateTime, cur.ID, cursorShardRule
		_, err = sqlexec.ExecNamed(ctx, e, setCloseCursorSQL, p)
	}
	if err != nil {
		return fmt.Errorf("record where shard %d/%d of %s resumes: %w", shardIndex, shardTotal, table, err)
	}
	return nil
}
