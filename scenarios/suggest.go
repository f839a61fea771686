package scenarios

import (
	"fmt"
	"strings"
)

// didYouMean is "; did you mean `x`?" for the candidate closest to word
// (the fewest single-character edits, a swap of two neighbours counting
// as one), or "" when none is close: at most a third of the word's
// length, and at least one edit.
func didYouMean(word string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		d := editDistance(strings.ToLower(word), strings.ToLower(c))
		if d > 0 && contains(c, word) {
			d = 1 // the same section, and the word is part of the key's last name: pooler.size -> pooler.default_pool_size
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	limit := max(1, len([]rune(word))/3)
	if best == "" || bestD == 0 || bestD > limit {
		return ""
	}
	return fmt.Sprintf("; did you mean `%s`?", best)
}

// contains reports whether dotted key c has word's section and its last
// name contains word's last name (three letters at least).
func contains(c, word string) bool {
	cs, cn := splitKey(strings.ToLower(c))
	ws, wn := splitKey(strings.ToLower(word))
	return len(wn) >= 3 && cs == ws && strings.Contains(cn, wn)
}

func splitKey(k string) (section, name string) {
	if i := strings.LastIndexByte(k, '.'); i >= 0 {
		return k[:i], k[i+1:]
	}
	return "", k
}

// editDistance is the optimal string alignment distance of a and b:
// insertions, deletions, substitutions and transpositions of neighbours.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// allKeys are every dotted key, for suggestions.
func allKeys() []string {
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = f.key
	}
	return out
}

// tabLine is the first line (1-based) whose indentation holds a tab, or 0.
func tabLine(data []byte) int {
	for i, line := range strings.Split(string(data), "\n") {
		indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
		if strings.Contains(indent, "\t") {
			return i + 1
		}
	}
	return 0
}
