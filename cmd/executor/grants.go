package main

import (
	"errors"
	"fmt"

	"github.com/orderjob/executor/internal/dbserver"
	"github.com/orderjob/executor/sql/migrations"
)

// grantError is a privilege error with the grant that fixes it, printed
// after the server's own message.
type grantError struct {
	err error
	fix string
}

func (e *grantError) Error() string { return e.err.Error() + "; fix: " + e.fix }
func (e *grantError) Unwrap() error { return e.err }

// explain adds to a command's error what the operator can do about it:
// run migrate for a missing table or column (migrations.Explain), the
// grant for a privilege the database user lacks (grantHint).
func explain(err error) error {
	return grantHint(migrations.Explain(err))
}

// grantHint adds to a privilege error (1142, 1143) that no command has
// explained yet the privilege to grant on which database, from the
// server's message: every verb that writes (requeue, cancel, purge,
// demo-data) meets it in its own statement, so it is said here, once.
func grantHint(err error) error {
	var ge *grantError
	if errors.As(err, &ge) {
		return err
	}
	d, ok := dbserver.DeniedBy(err)
	if !ok {
		return err
	}
	const need = "serve, run and the operator commands need SELECT, INSERT, UPDATE and DELETE there, " +
		"migrate CREATE, ALTER and INDEX besides (docs/configuration.md#the-database-user)"
	if d.Command == "" || d.User == "" {
		return &grantError{err: err, fix: "grant the database user the privilege named on the DSN's database; " + need}
	}
	db, on := "the DSN's database", "db.*"
	if d.Database != "" {
		db, on = "database "+d.Database, "`"+d.Database+"`.*"
	}
	return &grantError{err: err, fix: fmt.Sprintf("grant %s on %s to the database user %s (GRANT %s ON %s TO '%s'@'%%'); %s",
		d.Command, db, d.User, d.Command, on, d.User, need)}
}
