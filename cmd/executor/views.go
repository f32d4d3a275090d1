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
	view    V
	jsonOut bool
}

// newViewCtx makes a verb's context and adds -json to its flags.
func newViewCtx[V any](fs *flag.FlagSet, env *cliEnv, newView func(*sqlx.DB) V) *viewCtx[V] {
	c := &viewCtx[V]{env: env, newView: newView}
	addJSON(fs, &c.jsonOut)
	return c
}

// viewVerb is the flags function of a verb with no flags but -json.
func viewVerb[V any](newView func(*sqlx.DB) V, run func(ctx context.Context, c *viewCtx[V], pos []string) error) func(*flag.FlagSet, *cliEnv) runFunc {
	return func(fs *flag.FlagSet, env *cliEnv) runFunc {
		c := newViewCtx(fs, env, newView)
		return func(ctx context.Context, pos []string) error { return run(ctx, c, pos) }
	}
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
