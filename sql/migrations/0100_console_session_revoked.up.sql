-- Console sessions ended by sign-out before their expiry. A session is a
-- signed cookie any executor accepts, so sign-out records the session's id
-- here and every executor refuses it from then on. A row is useless after
-- the session's own expiry; sign-outs delete those.
--   session_id  the cookie's random nonce (base64url of 12 bytes)
--   expires_at  the session's expiry, UTC
--   idx_expires_at  the purge of expired rows
CREATE TABLE IF NOT EXISTS console_session_revoked (
    session_id  VARCHAR(32)  NOT NULL,
    expires_at  DATETIME(3)  NOT NULL,
    PRIMARY KEY (session_id),
    KEY idx_expires_at (expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
