package classify

import "strings"

// proseLabels open a line of prose the way a package name opens a Go
// commit subject.
var proseLabels = set("note todo fixme warning summary question problem tldr nb ps edit answer context background")

func isLowerWord(s string) bool {
	for _, r := range s {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return s != ""
}

// scopeOf returns the component a commit-style query names in its prefix:
// the scope of a Conventional Commits header ("fix(router): ..." ->
// "router", "feat(sendRedirect)!: ..." -> "sendRedirect") or the package
// of a Go-style header ("net/http: ..." -> "net/http", "mux: ..." ->
// "mux"). A bare type ("fix: ...") and prose ("Note: ...") have none.
func scopeOf(q string) string {
	q = strings.TrimSpace(q)
	colon := strings.IndexByte(q, ':')
	if colon <= 0 || colon+1 < len(q) && q[colon+1] != ' ' {
		return "" // no header, or "a::b" / "http://..."
	}
	head := strings.TrimSuffix(q[:colon], "!")
	if open := strings.IndexByte(head, '('); open > 0 {
		if !strings.HasSuffix(head, ")") || !isLowerWord(head[:open]) {
			return ""
		}
		s := strings.TrimSpace(head[open+1 : len(head)-1])
		if strings.ContainsAny(s, " \t") {
			return ""
		}
		return s
	}
	// Go style: a lowercase package path, not a commit type or a word of
	// prose ("Note:", "TODO:").
	if head != strings.ToLower(head) || conventional[head] || common[head] || fillers[head] || stopwords[head] || proseLabels[head] {
		return ""
	}
	for _, r := range head {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '/' || r == '.' || r == '_' || r == '-') {
			return ""
		}
	}
	return head
}
