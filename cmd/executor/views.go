package main

import (
	"context"
	"flag"

	"github.com/jmoiron/sqlx"
)

// viewCtx is what each verb of an operator command over one database view
// (deadletter, refunds, outbox) gets: the environment, the view, built when
// the verb opens the database, and -json.
type viewCtx[V any] struct {
	env     *cliEnv
	newView func(*sqlx.DB) V
	what    string // what the positional argument names, for usage errors
	view    V
	jsonOut bool
}

// open loads the config and opens the database (the views need no Redis)
// and builds the view; the function returned closes the database.
func (c *viewCtx[V]) open(ctx context.Context) (func(), error) {
	_, db, err := loadConfigDB(ctx, c.env)
	if err != nil {
		return nil, err
	}
	c.view = c.newView(db)
	return func() { db.Close() }, nil
}

// parse parses flags (before or after positionals), adds -json, and checks
// the number of positionals.
func (c *viewCtx[V]) parse(fs *flag.FlagSet, args []string, positionals int) ([]string, error) {
	return parseVerb(fs, args, positionals, c.what, &c.jsonOut)
}
