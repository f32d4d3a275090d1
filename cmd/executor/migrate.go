package main

import (
	"context"
	"fmt"

	"github.com/orderjob/executor/sql/migrations"
)

func init() {
	register(command{
		name:    "migrate",
		summary: "create or update the schema (idempotent; safe on existing order tables)",
		run:     cmdMigrate,
	})
}

func cmdMigrate(ctx context.Context, env *cliEnv, args []string) error {
	fs := newFlagSet(env, "migrate")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	_, db, err := loadConfigDB(ctx, env)
	if err != nil {
		return err
	}
	defer db.Close()
	did, err := migrations.Apply(ctx, db.DB)
	for _, v := range did {
		fmt.Fprintf(env.stdout, "applied migration %04d\n", v)
	}
	if err != nil {
		return err
	}
	if len(did) == 0 {
		fmt.Fprintln(env.stdout, "schema is up to date")
	}
	return nil
}
