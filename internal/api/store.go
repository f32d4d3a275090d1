package api

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/orderjob/executor/internal/sqlexec"
)

// The SQL of the console's session revocations (console_session_revoked):
// sign-out writes a session's id, every console request of a signed-in
// operator reads it.
type store struct{}

// revokeSessionSQL records a signed-out session until its expiry; a second
// sign-out of the same session changes nothing.
const revokeSessionSQL = `INSERT IGNORE INTO console_session_revoked (session_id, expires_at) VALUES (:id, :expires_at)`

func (store) revokeSession(ctx context.Context, db sqlx.ExecerContext, id string, expires time.Time) error {
	if _, err := sqlexec.ExecNamed(ctx, db, revokeSessionSQL, map[string]any{"id": id, "expires_at": expires.UTC()}); err != nil {
		return fmt.Errorf("revoke console session: %w", err)
	}
	return nil
}

// sessionRevokedSQL finds a session by its primary key: one row or none.
const sessionRevokedSQL = `SELECT COUNT(*) FROM console_session_revoked WHERE session_id = ?`

func (store) sessionRevoked(ctx context.Context, db sqlx.QueryerContext, id string) (bool, error) {
	var n int
	if err := sqlx.GetContext(ctx, db, &n, sessionRevokedSQL, id); err != nil {
		return false, fmt.Errorf("read console session revocation: %w", err)
	}
	return n > 0, nil
}

// purgeRevokedSQL deletes up to 1000 revocations whose sessions have
// expired anyway, through idx_expires_at.
const purgeRevokedSQL = `DELETE FROM console_session_revoked WHERE expires_at < ? ORDER BY expires_at LIMIT 1000`

func (store) purgeRevoked(ctx context.Context, db sqlx.ExecerContext, now time.Time) error {
	if _, err := db.ExecContext(ctx, purgeRevokedSQL, now.UTC()); err != nil {
		return fmt.Errorf("purge console session revocations: %w", err)
	}
	return nil
}
