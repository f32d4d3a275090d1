package migrations

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// StepStatus is one step as `executor migrate status` shows it.
type StepStatus struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	// State is "applied", "pending", "carry" (recorded in the older history
	// table: the next migrate carries it over), "unknown" (recorded, but
	// this executor has no such file: a newer one applied it), "skipped"
	// (recorded without running: it changes the shop's tables, which
	// order.schema declares) or "skip" (the next migrate records it so).
	State    string `json:"state"`
	Checksum string `json:"checksum,omitempty"` // of the file
	// Recorded is the checksum recorded when the step ran; Drift is true
	// when it differs from the file's (the file was edited after it ran).
	Recorded    string    `json:"recordedChecksum,omitempty"`
	Drift       bool      `json:"drift"`
	AppliedAt   time.Time `json:"appliedAt,omitzero"`
	ExecutionMS int64     `json:"executionMs,omitempty"`
	CarriedFrom string    `json:"carriedFrom,omitempty"`
	SkippedFor  string    `json:"skippedFor,omitempty"` // the setting it was skipped for: order.schema
}

// Status is the state of the database's migrations.
type Status struct {
	Table string       `json:"historyTable"`
	Steps []StepStatus `json:"steps"`
	// Problems are the schema's drift from what the executor relies on:
	// missing or incompatible tables, columns and indexes.
	Problems []Problem `json:"problems"`
	// Declared is true when order.schema declares the shop's tables: the
	// steps that would change them are skipped, and Problems include the
	// declared tables' (Source "order.schema").
	Declared bool `json:"declared"`
}

// Pending counts the steps a migrate would run or record, and, with no
// declaration, the steps skipped for one (they wait for -run-skipped).
func (s *Status) Pending() int {
	n := 0
	for _, st := range s.Steps {
		if st.State == "pending" || st.State == "carry" || st.State == "skip" || (st.State == "skipped" && !s.Declared) {
			n++
		}
	}
	return n
}

// Skipped counts the steps recorded as skipped.
func (s *Status) Skipped() int {
	n := 0
	for _, st := range s.Steps {
		if st.State == "skipped" {
			n++
		}
	}
	return n
}

// Drifted counts the steps whose file changed after they ran.
func (s *Status) Drifted() int {
	n := 0
	for _, st := range s.Steps {
		if st.Drift {
			n++
		}
	}
	return n
}

// Status reads the history and the schema; it changes nothing.
func (m *Migrator) Status(ctx context.Context) (*Status, error) {
	p, err := m.makePlan(ctx, m.db)
	if err != nil {
		return nil, err
	}
	st := &Status{Table: m.cfg.Table, Declared: m.cfg.Shop.Declared}
	carried, skip := map[int]bool{}, map[int]bool{}
	for _, s := range p.carry {
		carried[s.Version] = true
	}
	for _, s := range p.skip {
		skip[s.Version] = true
	}
	for _, s := range m.steps {
		ss := StepStatus{Version: s.Version, Name: s.Name, Checksum: s.Checksum, State: "pending"}
		if h, ok := p.applied[s.Version]; ok {
			ss.State, ss.Recorded, ss.AppliedAt, ss.ExecutionMS, ss.CarriedFrom = "applied", h.Checksum, h.AppliedAt, h.ExecutionMS, h.CarriedFrom
			ss.Drift = h.Checksum != s.Checksum
			if h.SkippedFor != "" {
				ss.State, ss.SkippedFor = "skipped", h.SkippedFor
			}
		} else if carried[s.Version] {
			ss.State, ss.CarriedFrom = "carry", p.carryFrom
		} else if skip[s.Version] {
			ss.State, ss.SkippedFor = "skip", SkippedFor
		}
		st.Steps = append(st.Steps, ss)
	}
	for _, u := range p.unknown {
		st.Steps = append(st.Steps, StepStatus{Version: u.Version, Name: u.Name, State: "unknown",
			Recorded: u.Checksum, AppliedAt: u.AppliedAt, ExecutionMS: u.ExecutionMS, CarriedFrom: u.CarriedFrom})
	}
	if err := m.check(ctx, m.db); err != nil {
		var se *SchemaError
		if !errors.As(err, &se) {
			return nil, err
		}
		st.Problems = se.Problems
	}
	return st, nil
}

// DryRun writes, as a SQL script, every statement a migrate would run now,
// history records included, and changes nothing. Each ALTER is shown with
// the algorithm tried first. It returns a *SchemaError, after writing the
// script, when something in the database would stop the migration.
func (m *Migrator) DryRun(ctx context.Context, w io.Writer) error {
	p, err := m.makePlan(ctx, m.db)
	if err != nil {
		return err
	}
	if err := m.writeScript(w, p); err != nil {
		return err
	}
	return m.writeDeclared(ctx, w)
}

// writeDeclared ends the dry run's script with the problems of the shop's
// declared tables, as comments: migrate never runs their fixes, a DBA
// does. It returns them as a *SchemaError (migrate would end with it).
func (m *Migrator) writeDeclared(ctx context.Context, w io.Writer) error {
	if !m.cfg.Shop.Declared {
		return nil
	}
	live, err := readSchema(ctx, m.db, declaredTables(m.cfg.Shop))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	probs := m.shopProblems(live)
	if len(probs) == 0 {
		fmt.Fprintln(w, "\n-- the shop's tables (order.schema) have what the close needs; migrate never changes them")
		return nil
	}
	fmt.Fprintln(w, "\n-- the shop's tables (order.schema) lack what the close needs; migrate never changes them, a DBA runs the fixes:")
	for _, pr := range probs {
		fmt.Fprintf(w, "-- %s\n", pr)
	}
	return &SchemaError{Problems: probs}
}

// DryRunCreate is DryRun for `migrate -dry-run -create-database`: the
// script starts with the CREATE DATABASE the migration would run and a USE
// of it. When the database does not exist yet (exists false), the rest is
// the plan for an empty database and nothing is read: the Migrator's
// connection may then be one to the server without a database. Nothing is
// created either way.
func (m *Migrator) DryRunCreate(ctx context.Context, w io.Writer, name string, exists bool) error {
	create, err := createDatabaseStatement(name)
	if err != nil {
		return err
	}
	var p *plan
	if exists {
		p, err = m.makePlan(ctx, m.db)
	} else {
		p, err = m.planFor(ctx, nil, schema{}) // an empty schema asks nothing of the querier
	}
	if err != nil {
		return err
	}
	state := "exists: the statement changes nothing"
	if !exists {
		state = "does not exist yet: the plan below is that of an empty database"
	}
	fmt.Fprintf(w, "%s;\nUSE `%s`;\n-- database %s %s\n", create, name, name, state)
	return m.writeScript(w, p)
}

// writeScript writes the plan as the dry run's SQL script.
func (m *Migrator) writeScript(w io.Writer, p *plan) error {
	fmt.Fprintf(w, "-- executor migrate -dry-run: history table %s\n", m.cfg.Table)
	fmt.Fprintln(w, "-- Each ALTER TABLE shows the algorithm tried first. When the server cannot apply it instantly, the migrator")
	fmt.Fprintln(w, "-- retries with ALGORITHM=INPLACE, LOCK=NONE, and stops rather than copy the table unless -allow-copy is given.")
	fmt.Fprintln(w, "-- Statements on one line ending in ';' can be run as they are, in this order.")
	for _, pr := range p.problems {
		fmt.Fprintf(w, "-- PROBLEM: %s\n", pr)
	}
	if len(p.blocked) > 0 {
		fmt.Fprintf(w, "-- PROBLEM: %s\n", (&SkippedError{Steps: p.blocked}).Error())
	}
	if !p.historyExists {
		fmt.Fprintf(w, "%s;\n", fmt.Sprintf(createHistorySQL, m.cfg.Table))
	}
	if len(p.skip) > 0 && p.historyExists && !p.historySkipped {
		fmt.Fprintf(w, "%s;\n", fmt.Sprintf(addSkippedSQL, m.cfg.Table))
	}
	for _, s := range p.skip {
		fmt.Fprintf(w, "-- %s: skipped: order.schema declares the shop's tables (%s); recorded, not run\n%s;\n",
			s.ID(), strings.Join(stepTables(s), ", "), recordSkippedLiteral(m.cfg.Table, s))
	}
	for _, s := range p.carry {
		fmt.Fprintf(w, "-- %s: carried over from %s\n%s;\n", s.ID(), p.carryFrom, recordLiteral(m.cfg.Table, s, p.carryFrom))
	}
	writeActions := func(acts []action) {
		for _, a := range acts {
			if a.Note != "" {
				fmt.Fprintf(w, "-- %s\n", a.Note)
			}
			switch {
			case a.SQL == "":
			case a.Alter:
				fmt.Fprintf(w, "%s, %s;\n", a.SQL, a.firstAlgorithm())
			default:
				fmt.Fprintf(w, "%s;\n", a.SQL)
			}
		}
	}
	for _, sp := range p.steps {
		fmt.Fprintf(w, "\n-- %s (sha256 %s)\n", sp.Step.ID(), sp.Step.Checksum)
		writeActions(sp.Actions)
		if sp.Rerun {
			fmt.Fprintf(w, "%s;\n", recordRanLiteral(m.cfg.Table, sp.Step))
			continue
		}
		fmt.Fprintf(w, "%s;\n", recordLiteral(m.cfg.Table, sp.Step, ""))
	}
	if len(p.ensure) > 0 {
		fmt.Fprintln(w, "\n-- schema check: what the executor needs and the database still lacks")
		writeActions(p.ensure)
	}
	if len(p.steps) == 0 && len(p.ensure) == 0 && len(p.carry) == 0 && len(p.skip) == 0 && p.historyExists {
		fmt.Fprintln(w, "-- nothing to do: the schema is up to date")
	}
	if len(p.blocked) > 0 {
		return &SkippedError{Steps: p.blocked}
	}
	if len(p.problems) > 0 {
		return &SchemaError{Problems: p.problems}
	}
	return nil
}

// recordSkippedLiteral is a skipped step's history INSERT, values inline.
func recordSkippedLiteral(tbl string, s Migration) string {
	return fmt.Sprintf("INSERT INTO %s (version, name, checksum, applied_at, execution_ms, skipped_for) VALUES (%d, '%s', '%s', UTC_TIMESTAMP(3), 0, '%s')",
		tbl, s.Version, s.Name, s.Checksum, SkippedFor)
}

// recordRanLiteral is recordRanSQL with its values inline.
func recordRanLiteral(tbl string, s Migration) string {
	return fmt.Sprintf("UPDATE %s SET checksum = '%s', applied_at = UTC_TIMESTAMP(3), execution_ms = 0, skipped_for = NULL WHERE version = %d",
		tbl, s.Checksum, s.Version)
}

// recordLiteral is the history INSERT of a step with its values inline, for
// the dry-run script (names are [a-z0-9_] by the file-name rule, checksums
// hex).
func recordLiteral(tbl string, s Migration, carriedFrom string) string {
	from := "NULL"
	if carriedFrom != "" {
		from = "'" + carriedFrom + "'"
	}
	return fmt.Sprintf("INSERT INTO %s (version, name, checksum, applied_at, execution_ms, carried_from) VALUES (%d, '%s', '%s', UTC_TIMESTAMP(3), 0, %s)",
		tbl, s.Version, s.Name, s.Checksum, from)
}
