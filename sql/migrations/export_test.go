package migrations

import (
	"database/sql"
	"io/fs"
)

// NewFromFS returns a Migrator of the *.up.sql files of fsys, for tests of
// steps the embedded files do not have (a copying ALTER, a lock wait).
func NewFromFS(db *sql.DB, cfg Config, fsys fs.FS) (*Migrator, error) {
	steps, err := load(fsys)
	if err != nil {
		return nil, err
	}
	return newMigrator(db, cfg, steps)
}

// StepTables lists the tables a step touches.
func StepTables(m Migration) []string { return stepTables(m) }
