package mariadbtest

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jmoiron/sqlx"
)

// PrimaryArgs are the options of a replication primary with the given
// server id: a row-format binary log, which a replica follows by GTID.
func PrimaryArgs(serverID int) []string {
	return []string{"--server-id=" + strconv.Itoa(serverID), "--log-bin=mysql-bin", "--binlog-format=ROW"}
}

// ReplicaArgs are the options of a replica with the given server id: read
// only (for users without READ ONLY ADMIN, as a replica runs), its relay
// log in the data directory.
func ReplicaArgs(serverID int) []string {
	return []string{"--server-id=" + strconv.Itoa(serverID), "--relay-log=relay-bin", "--read-only=1"}
}

// Exec runs statements on the server as root, in order, each bounded by
// 10 s; the first error is returned with its statement.
func (s *Server) Exec(ctx context.Context, stmts ...string) error {
	db, err := sqlx.Open("mysql", s.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	for _, stmt := range stmts {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := db.ExecContext(sctx, stmt)
		cancel()
		if err != nil {
			return fmt.Errorf("%s on %s: %w", stmt, s.Addr, err)
		}
	}
	return nil
}

// CreateUser creates user with password, reaching the server over TCP
// or its socket, with every privilege on database db and no more: an
// ordinary user, whom read_only stops (root has READ ONLY ADMIN and is not
// stopped). On a primary, replicas get the user too.
func (s *Server) CreateUser(ctx context.Context, user, password, db string) error {
	var stmts []string
	for _, host := range []string{"%", "localhost"} {
		stmts = append(stmts, fmt.Sprintf("CREATE USER '%s'@'%s' IDENTIFIED BY '%s'", user, host, password),
			fmt.Sprintf("GRANT ALL ON `%s`.* TO '%s'@'%s'", db, user, host))
	}
	return s.Exec(ctx, stmts...)
}

// ReplicateFrom makes s a replica of primary over loopback (as root, by
// GTID from the replica's own position: from the start for a new one) and
// waits until its IO and SQL threads run.
func (s *Server) ReplicateFrom(ctx context.Context, primary *Server) error {
	err := s.Exec(ctx,
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=%d, MASTER_USER='root', MASTER_PASSWORD='', "+
			"MASTER_CONNECT_RETRY=1, MASTER_USE_GTID=slave_pos", primary.Port),
		"START SLAVE")
	if err != nil {
		return fmt.Errorf("set up replication: %w", err)
	}
	db, err := sqlx.Open("mysql", s.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		io, sql, lastErr, err := slaveStatus(ctx, db)
		if err == nil && io == "Yes" && sql == "Yes" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica on %s not running after 30s (IO %q, SQL %q, %w): %s", s.Addr, io, sql, err, lastErr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// slaveStatus reads the replica's IO and SQL threads and their last errors.
func slaveStatus(ctx context.Context, db *sqlx.DB) (io, sql, lastErr string, err error) {
	rows, err := db.QueryxContext(ctx, "SHOW SLAVE STATUS") //nolint:sqlclosecheck // closed by the defer below (the linter misses it with named results)
	if err != nil {
		return "", "", "", err
	}
	defer rows.Close()
	for rows.Next() {
		m := map[string]any{}
		if err := rows.MapScan(m); err != nil {
			return "", "", "", err
		}
		io, sql = str(m["Slave_IO_Running"]), str(m["Slave_SQL_Running"])
		lastErr = str(m["Last_IO_Error"]) + str(m["Last_SQL_Error"])
	}
	return io, sql, lastErr, rows.Err()
}

func str(v any) string {
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// WaitCaughtUp waits until replica s has applied everything primary has
// written to its binary log so far (MASTER_GTID_WAIT), at most timeout.
func (s *Server) WaitCaughtUp(ctx context.Context, primary *Server, timeout time.Duration) error {
	p, err := sqlx.Open("mysql", primary.DSN(""))
	if err != nil {
		return err
	}
	defer p.Close()
	var pos string
	if err := p.GetContext(ctx, &pos, "SELECT @@GLOBAL.gtid_binlog_pos"); err != nil {
		return fmt.Errorf("read the primary's binlog position: %w", err)
	}
	r, err := sqlx.Open("mysql", s.DSN("")+"&readTimeout="+(timeout+5*time.Second).String())
	if err != nil {
		return err
	}
	defer r.Close()
	var res int
	if err := r.GetContext(ctx, &res, "SELECT MASTER_GTID_WAIT(?, ?)", pos, timeout.Seconds()); err != nil {
		return fmt.Errorf("wait for GTID %s on %s: %w", pos, s.Addr, err)
	}
	if res != 0 {
		return fmt.Errorf("replica on %s did not reach GTID %s within %s", s.Addr, pos, timeout)
	}
	return nil
}

// Promote makes replica s a primary: replication stopped and forgotten,
// writes allowed.
func (s *Server) Promote(ctx context.Context) error {
	return s.Exec(ctx, "STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = 0")
}
