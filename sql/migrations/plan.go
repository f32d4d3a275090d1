package migrations

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// action is one statement the migrator will run, or a note about one it
// will not.
type action struct {
	SQL   string // "" for a note only
	Alter bool   // an ALTER TABLE: runs under the algorithm rules
	// Inplace starts the algorithm rules at INPLACE: an ALTER that adds or
	// drops an index is never instant, on MySQL or MariaDB.
	Inplace bool
	Note    string // why, printed before it
}

// firstAlgorithm is the ALGORITHM clause an ALTER is tried with first.
func (a action) firstAlgorithm() string {
	if a.Inplace {
		return algoInplace
	}
	return algoInstant
}

func changesIndex(cs []clause) bool {
	for _, c := range cs {
		if c.Kind == addIndex || c.Kind == dropIndex {
			return true
		}
	}
	return false
}

// stepPlan is what a pending step will run on this database.
type stepPlan struct {
	Step    Migration
	Actions []action
	// Rerun is a step recorded as skipped that runs now (-run-skipped):
	// its record is updated, not inserted.
	Rerun bool
}

// plan is everything a migrate would do, computed before anything runs.
type plan struct {
	historyExists bool
	applied       map[int]historyRow
	unknown       []historyRow // recorded steps this binary has no file for
	carryFrom     string       // the older history table carried over, if any
	carry         []Migration  // steps whose record is carried over
	steps         []stepPlan   // pending steps, in order
	ensure        []action     // after the steps: what is still missing
	problems      []Problem    // incompatibilities: nothing runs while any
	// historySkipped says the history table has skipped_for (or will:
	// one created now has it).
	historySkipped bool
	skip           []Migration  // steps of the shop's tables recorded as skipped, not run
	blocked        []historyRow // steps recorded as skipped, with no declaration now and no -run-skipped
}

// historyColumns are the columns of our history table a table of the
// configured name must have to be taken for one.
var historyColumns = []string{"version", "name", "checksum", "applied_at"}

// legacyColumns is the exact shape of the history table of executors before
// it was renamed. Another tool's schema_migrations (golang-migrate's
// version+dirty, Rails' version) never matches.
var legacyColumns = []string{"version", "name", "applied_at"}

// makePlan reads the live schema and the history and plans the migration.
func (m *Migrator) makePlan(ctx context.Context, q querier) (*plan, error) {
	names := append(tableNames(m.steps), m.cfg.Table, legacyTable)
	live, err := readSchema(ctx, q, names)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return m.planFor(ctx, q, live)
}

// planFor plans the migration of the live schema, reading the history
// through q when live holds a history table.
func (m *Migrator) planFor(ctx context.Context, q querier, live schema) (*plan, error) {
	p := &plan{applied: map[int]historyRow{}}
	if h := live[m.cfg.Table]; h != nil {
		for _, c := range historyColumns {
			if h.column(c) == nil {
				return nil, fmt.Errorf("migrations: table %s exists but is not an executor history table (it has no %s column); "+
					"set mysql.migrationsTable to a name no other tool uses", m.cfg.Table, c)
			}
		}
		p.historyExists = true
		p.historySkipped = h.column("skipped_for") != nil
		rows, err := readHistory(ctx, q, m.cfg.Table, p.historySkipped)
		if err != nil {
			return nil, fmt.Errorf("migrations: %w", err)
		}
		known := map[int]bool{}
		for _, s := range m.steps {
			known[s.Version] = true
		}
		for _, r := range rows {
			p.applied[r.Version] = r
			if !known[r.Version] {
				p.unknown = append(p.unknown, r)
			}
		}
	}
	if len(p.applied) == 0 && m.cfg.Table != legacyTable {
		if err := m.planCarry(ctx, q, live, p); err != nil {
			return nil, err
		}
	}
	carried := map[int]bool{}
	for _, s := range p.carry {
		carried[s.Version] = true
	}

	sim := live.clone()
	delete(sim, m.cfg.Table)
	delete(sim, legacyTable)
	ref := schema{} // what the steps so far define: a table missing from sim is recreated from it
	for _, s := range m.steps {
		if sp, run := m.classify(p, s, carried[s.Version]); run {
			for _, st := range s.parsed {
				acts, probs := planStatement(st, sim, ref)
				sp.Actions = append(sp.Actions, acts...)
				p.problems = append(p.problems, probs...)
			}
			p.steps = append(p.steps, sp)
		}
		for _, st := range s.parsed {
			_ = foldStatement(ref, st) // load checked the fold
		}
	}
	p.ensure, p.problems = ensure(m.needed(), sim, p.problems)
	p.problems = dedupe(p.problems)
	return p, nil
}

// classify decides what becomes of step s: it runs (a stepPlan is
// returned with run true), is recorded as skipped (a step of the shop's
// declared tables), or is left as recorded. A step recorded as skipped
// runs only with RunSkipped; without it and without a declaration it
// blocks the migration.
func (m *Migrator) classify(p *plan, s Migration, carried bool) (stepPlan, bool) {
	h, done := p.applied[s.Version]
	switch {
	case done && h.SkippedFor != "" && m.cfg.RunSkipped:
		return stepPlan{Step: s, Rerun: true}, true
	case done && h.SkippedFor != "" && !m.cfg.Shop.Declared:
		p.blocked = append(p.blocked, h)
	case done || carried:
	case m.skips(s):
		p.skip = append(p.skip, s)
	default:
		return stepPlan{Step: s}, true
	}
	return stepPlan{}, false
}

// planCarry decides whether an older history table is carried over: only
// one shaped exactly like ours was, and only the rows naming our steps.
func (m *Migrator) planCarry(ctx context.Context, q querier, live schema, p *plan) error {
	old := live[legacyTable]
	if old == nil || len(old.Columns) != len(legacyColumns) {
		return nil
	}
	for _, c := range legacyColumns {
		if old.column(c) == nil {
			return nil
		}
	}
	if family(old.column("version").Type) != "integer" || family(old.column("name").Type) != "string" {
		return nil
	}
	rows, err := readLegacy(ctx, q, legacyTable)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	for _, s := range m.steps {
		if rows[s.Version] == s.Name {
			p.carry = append(p.carry, s)
		}
	}
	if len(p.carry) > 0 {
		p.carryFrom = legacyTable
	}
	return nil
}

// planStatement plans one statement of a pending step against sim (the
// schema as it will be when the statement runs) and changes sim as it
// will.
func planStatement(st statement, sim, ref schema) ([]action, []Problem) {
	var acts []action
	var probs []Problem
	switch st.Kind {
	case stmtCreateTable:
		have := sim[st.Table]
		if have == nil {
			t := st.Create.clone()
			t.Options = st.Options
			sim[st.Table] = t
			return []action{{SQL: st.SQL}}, nil
		}
		adds, pr := reconcile(st.Create, have)
		probs = append(probs, pr...)
		if len(adds) == 0 {
			return []action{{Note: st.Table + " exists with every column and index this step defines"}}, probs
		}
		acts = append(acts, action{Note: st.Table + " exists: adding what this step defines and it lacks"})
		acts = append(acts, addActions(st.Table, have, adds)...)
		return acts, probs
	case stmtAlterTable:
		t := sim[st.Table]
		if t == nil {
			r := ref[st.Table]
			if r == nil {
				return nil, []Problem{{Table: st.Table, Object: "table " + st.Table,
					Detail: "is missing and no step defines it", Fix: "restore the table"}}
			}
			t = r.clone()
			sim[st.Table] = t
			acts = append(acts, action{Note: st.Table + " is missing: creating it as the earlier steps define it"},
				action{SQL: t.createSQL()})
		}
		var keep []clause
		var keepSQL, skipped []string
		for _, c := range st.Clauses {
			done, pr := clauseDone(st.Table, t, c)
			if pr != nil {
				probs = append(probs, *pr)
			}
			if done {
				skipped = append(skipped, c.SQL)
				continue
			}
			keep = append(keep, c)
			keepSQL = append(keepSQL, c.SQL)
			applyClause(t, c)
		}
		if len(skipped) > 0 {
			acts = append(acts, action{Note: "already in " + st.Table + ": " + strings.Join(skipped, "; ")})
		}
		switch {
		case len(keep) == len(st.Clauses):
			acts = append(acts, action{SQL: st.SQL, Alter: true, Inplace: changesIndex(keep)})
		case len(keep) > 0:
			acts = append(acts, action{SQL: "ALTER TABLE " + st.Table + " " + strings.Join(keepSQL, ", "), Alter: true, Inplace: changesIndex(keep)})
		}
		return acts, probs
	case stmtDropTable:
		if sim[st.Table] == nil {
			return []action{{Note: st.Table + " is already gone"}}, nil
		}
		delete(sim, st.Table)
		return []action{{SQL: st.SQL}}, nil
	case stmtRenameTable:
		from, to := sim[st.Table], sim[st.NewName]
		switch {
		case from != nil && to == nil:
			delete(sim, st.Table)
			from.Name = st.NewName
			sim[st.NewName] = from
			return []action{{SQL: st.SQL}}, nil
		case from == nil && to != nil:
			return []action{{Note: st.Table + " is already renamed to " + st.NewName}}, nil
		case from != nil:
			return nil, []Problem{{Table: st.NewName, Object: "table " + st.NewName,
				Detail: "exists, so " + st.Table + " cannot be renamed to it", Fix: "rename or drop one of them"}}
		}
		return nil, []Problem{{Table: st.Table, Object: "table " + st.Table, Detail: "is missing", Fix: "restore the table"}}
	}
	return []action{{SQL: st.SQL}}, nil
}

// ensure plans what is still missing after the steps from want (the
// schema the executor relies on): tables are created from their
// definition, columns and indexes added one ALTER each. It returns the
// actions and probs with the incompatibilities it found added.
func ensure(want, sim schema, probs []Problem) ([]action, []Problem) {
	var acts []action
	for _, name := range sortedNames(want) {
		w := want[name]
		have := sim[name]
		if have == nil {
			acts = append(acts, action{Note: name + " is missing: creating it as the steps define it"}, action{SQL: w.createSQL()})
			sim[name] = w.clone()
			continue
		}
		adds, pr := reconcile(w, have)
		probs = append(probs, pr...)
		if len(adds) > 0 {
			acts = append(acts, action{Note: name + " lacks what the executor needs although its steps are recorded: adding it"})
		}
		acts = append(acts, addActions(name, have, adds)...)
	}
	return acts, probs
}

// addActions turns reconcile's clauses into one ALTER each and applies them
// to have.
func addActions(tbl string, have *table, adds []clause) []action {
	acts := make([]action, 0, len(adds))
	for _, c := range adds {
		acts = append(acts, action{SQL: "ALTER TABLE " + tbl + " " + c.SQL, Alter: true, Inplace: c.Kind == addIndex, Note: c.Note})
		applyClause(have, c)
	}
	return acts
}

// diffSchema lists what live lacks of want, or has in a form the executor
// cannot use.
func diffSchema(want, live schema) []Problem {
	var probs []Problem
	for _, name := range sortedNames(want) {
		have := live[name]
		if have == nil {
			probs = append(probs, Problem{Table: name, Object: "table " + name, Detail: "is missing", Fix: runMigrate, Missing: true})
			continue
		}
		adds, pr := reconcile(want[name], have)
		for _, c := range adds {
			obj := "column " + c.Column.Name
			if c.Kind == addIndex {
				obj = "index " + c.Index.Name
			}
			probs = append(probs, Problem{Table: name, Object: obj, Detail: "is missing", Fix: runMigrate, Missing: true})
		}
		probs = append(probs, pr...)
	}
	return probs
}

func sortedNames(s schema) []string {
	names := make([]string, 0, len(s))
	for n := range s {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func dedupe(probs []Problem) []Problem {
	seen := map[string]bool{}
	return slices.DeleteFunc(probs, func(p Problem) bool {
		k := p.Table + "\x00" + p.Object
		if seen[k] {
			return true
		}
		seen[k] = true
		return false
	})
}
