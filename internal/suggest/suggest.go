// Package suggest finds the name a mistyped word most likely meant, for
// the "did you mean" of the command line and of the configuration's
// unknown keys.
package suggest

// Closest is the name nearest to word by edit distance, when it is near
// enough to be a typo (at most 2 edits, and fewer than half the word) or
// word is a prefix of it; "" otherwise.
func Closest(word string, names []string) string {
	best, bestD := "", 0
	for _, n := range names {
		d := editDistance(word, n)
		if best == "" || d < bestD {
			best, bestD = n, d
		}
	}
	if best == "" {
		return ""
	}
	if bestD <= 2 && 2*bestD < len([]rune(word)) {
		return best
	}
	for _, n := range names {
		if len(word) >= 3 && len(n) > len(word) && n[:len(word)] == word {
			return n
		}
	}
	return ""
}

// editDistance is the optimal-string-alignment distance between a and b,
// in runes: insertions, deletions, substitutions and swaps of two
// neighbours ("lsit" → "list") each count one.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
