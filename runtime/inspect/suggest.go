package inspect

import (
	"fmt"
	"strings"
)

// DidYouMean returns ` (did you mean "x"?)` for the candidate nearest to
// name, or "" when none is near enough to be a likely typo. Near: an
// edit distance (with swaps of neighbours as one edit) of at most a third
// of name's length (at least 1), or a candidate ending in name after a
// '.' or '/' (the type name of a handler's import/path.Type), starting
// with name and ':' (a partition stream given for its DLQ), or ending in
// ":{name}" (a bare key given for its partition stream), ignoring case.
func DidYouMean(name string, candidates []string) string {
	best, bestD := "", -1
	limit := max(1, len([]rune(name))/3)
	lower := strings.ToLower(name)
	for _, c := range candidates {
		if c == name {
			continue
		}
		lc := strings.ToLower(c)
		d := distance(lower, lc)
		if len(lower) >= 3 && (strings.HasSuffix(lc, "."+lower) || strings.HasSuffix(lc, "/"+lower) || strings.HasPrefix(lc, lower+":")) {
			d = 0
		}
		if lower != "" && !strings.ContainsAny(lower, "{}") && strings.HasSuffix(lc, ":{"+lower+"}") {
			d = 0
		}
		if d <= limit && (bestD < 0 || d < bestD) {
			best, bestD = c, d
		}
	}
	if bestD < 0 {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// distance is the optimal string alignment distance of a and b: the
// insertions, deletions, substitutions and swaps of two neighbours that
// turn one into the other (by runes).
func distance(a, b string) int {
	x, y := []rune(a), []rune(b)
	// Three rows of the table: the previous two and the current one.
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

// listSome joins up to n of names, saying how many more there are.
func listSome(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}
