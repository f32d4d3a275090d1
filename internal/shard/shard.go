// Package shard assigns rows to the shards of a broadcast job: the one rule
// every reader of shards (the close scan and its cursors, the dead-letter
// retry, the lifecycle jobs, the delayed-task sweep) applies, in SQL with
// Match and in Go with Of.
//
// The rule hashes the row's id instead of taking id % total: ids are not
// spread evenly over residues. A Galera cluster sets auto_increment_increment
// to its node count (ids 1, 3, 5, ... through one node: with id % 2 one
// executor gets every row and the other none), and snowflake-style ids
// written at low rates are mostly even. The hash folds the id's high half
// onto its low half, multiplies by 2654435761 (Knuth's multiplicative
// constant, 2^32 over the golden ratio) modulo 2^32 and maps the 32-bit
// result onto [0, total) by its high bits ((h * total) >> 32), so odd-only,
// even-only, stepped, gapped and snowflake ids all split evenly. Every
// intermediate value stays below 2^64, so the server's BIGINT UNSIGNED
// arithmetic never overflows (for total < 2^32), and the expression reads
// only the id: on an index whose suffix is the primary key it is evaluated
// on the index entry, without reading the row.
package shard

// golden is Knuth's multiplicative hashing constant, 2^32 / phi.
const golden = 2654435761

// Of returns the shard of id among total shards, in [0, total); total <= 1
// puts every id in shard 0. It computes what Match's SQL computes; a test
// checks the two agree on the server.
func Of(id int64, total int) int {
	if total <= 1 {
		return 0
	}
	return int((mix(id) * uint64(total)) >> 32)
}

// mix is the 32-bit hash of id that Of scales onto the shards.
func mix(id int64) uint64 {
	u := uint64(id)
	folded := (u ^ (u >> 32)) & 0xFFFFFFFF
	return (folded * golden) & 0xFFFFFFFF
}

// Match returns the SQL condition that holds for the rows whose column col
// (a BIGINT id, qualified as the statement needs) falls in shard
// :shard_index of :shard_total, the two named parameters every shard reader
// binds. It is Of in SQL: MariaDB's and MySQL's bit operators work on
// unsigned 64-bit values, as Of does, negative ids included.
func Match(col string) string {
	return "((((((" + col + " ^ (" + col + " >> 32)) & 4294967295) * 2654435761) & 4294967295) * :shard_total) >> 32) = :shard_index"
}

// Counts returns how many of ids fall in each of total shards (total <= 1:
// one count), as the shards' runs would split them.
func Counts(ids []int64, total int) []int {
	counts := make([]int, max(total, 1))
	for _, id := range ids {
		counts[Of(id, total)]++
	}
	return counts
}
