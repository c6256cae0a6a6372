// Package suggest finds, for a name someone mistyped, the name they most
// likely meant: "did you mean hash_file?" for hash_fiel, parameters for
// paramters.
package suggest

import "strings"

// Nearest returns the candidate closest to name by edit distance (a
// swap of two neighbours counts as one edit), ignoring case, if it is
// close enough to be a likely typo: at most one edit for names of up to
// four characters, two up to eight, and three beyond. Among equals the
// first wins. It returns "" when none is close, and when name is one of
// candidates.
func Nearest(name string, candidates []string) string {
	best, bestDist := "", maxEdits(name)+1
	for _, c := range candidates {
		if c == name {
			return ""
		}
		if d := distance(strings.ToLower(name), strings.ToLower(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// DidYouMean is "; did you mean X?" for the candidate Nearest finds, or
// "".
func DidYouMean(name string, candidates []string) string {
	if n := Nearest(name, candidates); n != "" {
		return "; did you mean " + n + "?"
	}
	return ""
}

// maxEdits is how many edits a typo of name may plausibly have.
func maxEdits(name string) int {
	switch n := len([]rune(name)); {
	case n <= 4:
		return 1
	case n <= 8:
		return 2
	}
	return 3
}

// distance is the optimal string alignment distance between a and b:
// insertions, deletions, substitutions and swaps of neighbours, by rune.
func distance(a, b string) int {
	x, y := []rune(a), []rune(b)
	// rows[i][j] is the distance between x[:i] and y[:j]; three rows
	// suffice for the swap.
	prev2, prev, cur := make([]int, len(y)+1), make([]int, len(y)+1), make([]int, len(y)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(x); i++ {
		cur[0] = i
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(y)]
}
