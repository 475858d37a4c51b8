package classify

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// token is one word of the query after punctuation is trimmed.
type token struct {
	raw   string // text as written, trimmed (symbols are reported from it)
	low   string // lowercased raw
	shape bool   // looks like a code identifier by itself (see isSymbolShape)
	look  bool   // a symbol because syms knows it
	slot  bool   // a symbol because an explicit cue names it ("where is X defined")
	quote bool   // was in backticks
	init  bool   // first word of a sentence (capital here means nothing)
	stop  bool   // ends a clause: followed by . , ; : ? ! or a closing quote
	body  bool   // not on the first non-empty line (title) of the query
	num   bool   // a plain number: 3, 90, 2.31 (no letters)
	ver   bool   // a version: v2, v1.2.3, 2.31.0, 3.x
	year  bool   // 1990..2099
	date  bool   // 2024-03-01 or 2024/03/01
	sha   bool   // hex commit id, 7..40 chars with a digit and a letter
}

func (t *token) isSym() bool { return t.shape || t.look || t.slot }

// tokenize splits the query into tokens. Backticked spans are symbols; code
// fences are skipped as markers but their content is tokenized normally.
func tokenize(q string) []token {
	toks := make([]token, 0, len(q)/5+1)
	title := true
	seen := false
	for line := range strings.SplitSeq(q, "\n") {
		if seen {
			title = false
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		seen = true
		if strings.HasPrefix(line, "```") || strings.HasPrefix(line, "~~~") {
			continue
		}
		start := true
		i := 0
		for i < len(line) {
			c := line[i]
			if c == ' ' || c == '\t' || c == '\r' {
				i++
				continue
			}
			if c == '`' {
				j := strings.IndexByte(line[i+1:], '`')
				if j < 0 {
					i++
					continue
				}
				span := line[i+1 : i+1+j]
				i += j + 2
				stop := false
				for i < len(line) && strings.IndexByte(".,;:?!)", line[i]) >= 0 {
					stop = stop || line[i] != ')'
					i++
				}
				toks = appendQuoted(toks, span, !title, stop)
				start = stop
				continue
			}
			j := i
			for j < len(line) && line[j] != ' ' && line[j] != '\t' && line[j] != '`' {
				j++
			}
			field := line[i:j]
			i = j
			t, ok := makeToken(field)
			if !ok {
				continue
			}
			t.body = !title
			t.init = start
			start = t.stop
			toks = append(toks, t)
		}
	}
	return toks
}

// appendQuoted adds a backticked span: a single word is a symbol whatever
// its shape; a span with spaces (`requests.get(url, timeout=1)`) keeps the
// identifier-shaped words of its first word.
func appendQuoted(toks []token, span string, body, stop bool) []token {
	span = strings.TrimSpace(span)
	if span == "" {
		return toks
	}
	f := span
	if k := strings.IndexAny(span, " \t"); k >= 0 {
		f = span[:k]
	}
	name := f
	if k := strings.IndexAny(f, "(<["); k > 0 {
		name = f[:k]
	}
	name = strings.Trim(name, "\"',;:")
	if name == "" {
		return toks
	}
	t := token{raw: name, low: strings.ToLower(name), quote: true, shape: true, body: body, stop: stop}
	return append(toks, t)
}

const trailing = ".,;:!?)]}>\"'”’"

// makeToken trims one whitespace-separated field and tags its shape.
func makeToken(f string) (token, bool) {
	var t token
	// Go method expression: (*Router).Mount, (Router).Mount.
	if strings.HasPrefix(f, "(") {
		if n := receiverLen(f); n > 0 {
			rest := f[n:]
			t.stop = strings.ContainsAny(rest, ".,;:!?")
			t.raw = f[:n]
			t.low = strings.ToLower(t.raw)
			t.shape = true
			return t, true
		}
	}
	f = strings.TrimLeft(f, "\"'([{<*&@“‘")
	// call: name(...) — also "foo()" and "requests.get(url,".
	if k := strings.IndexByte(f, '('); k > 0 {
		name, rest := f[:k], f[k:]
		switch {
		case conventional[strings.ToLower(name)] && strings.Contains(rest, ")") && strings.HasSuffix(strings.TrimRight(rest, "!"), ":"):
			// "fix(router):" — a Conventional Commits prefix.
			t.raw, t.stop = name, true
		case rest == "(s)" || rest == "(es)" || strings.HasPrefix(rest, "(s)") || strings.HasPrefix(rest, "(es)"):
			t.raw = name // plural marker: "file(s)"
			t.stop = strings.ContainsAny(strings.TrimLeft(rest, "(es)"), ".,;:!?")
		case isIdentPath(name):
			t.raw, t.shape = name, true
			if c := strings.LastIndexByte(rest, ')'); c >= 0 {
				t.stop = strings.ContainsAny(rest[c:], ".,;:!?")
			}
		default:
			t.raw = name
		}
		if t.raw == "" {
			return t, false
		}
		t.low = strings.ToLower(t.raw)
		return t, true
	}
	// Generic type: Vec<T>, List<String>.
	if k := strings.IndexByte(f, '<'); k > 0 && isIdent(f[:k]) && strings.Contains(f[k:], ">") {
		t.raw, t.shape = f[:k], true
		t.stop = strings.ContainsAny(f[strings.LastIndexByte(f, '>'):], ".,;:!?")
		t.low = strings.ToLower(t.raw)
		return t, true
	}
	trimmed := strings.TrimRight(f, trailing)
	if len(trimmed) < len(f) && strings.ContainsAny(f[len(trimmed):], ".,;:!?") {
		t.stop = true
	}
	f = trimmed
	for _, s := range []string{"'s", "’s"} {
		if strings.HasSuffix(f, s) && len(f) > len(s) {
			f = f[:len(f)-len(s)]
		}
	}
	f = strings.ReplaceAll(f, "’", "'")
	if f == "" {
		return t, false
	}
	t.raw = f
	t.low = strings.ToLower(f)
	tagNumeric(&t)
	if !t.num && !t.ver && !t.year && !t.date && !t.sha {
		t.shape = isSymbolShape(f)
	}
	return t, true
}

// receiverLen reports the length of a leading "(*T).m" or "(T).m".
func receiverLen(f string) int {
	i := 1
	if i < len(f) && f[i] == '*' {
		i++
	}
	j := i
	for j < len(f) && isIdentByte(f[j]) {
		j++
	}
	if j == i || j+1 >= len(f) || f[j] != ')' || f[j+1] != '.' {
		return 0
	}
	k := j + 2
	for k < len(f) && isIdentByte(f[k]) {
		k++
	}
	if k == j+2 {
		return 0
	}
	return k
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// isIdent: [A-Za-z_$][A-Za-z0-9_$]*
func isIdent(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isIdentByte(s[i]) {
			return false
		}
	}
	return true
}

// isIdentPath: identifiers joined by "." or "::".
func isIdentPath(s string) bool {
	if s == "" {
		return false
	}
	for part := range strings.SplitSeq(strings.ReplaceAll(s, "::", "."), ".") {
		if !isIdent(part) {
			return false
		}
	}
	return true
}

// tagNumeric marks numbers, versions, years, dates and commit ids.
func tagNumeric(t *token) {
	s := t.low
	digits, letters, dots, hex := 0, 0, 0, true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			digits++
		case c >= 'a' && c <= 'z':
			letters++
			if c > 'f' {
				hex = false
			}
		case c == '.':
			dots++
			hex = false
		default:
			hex = false
		}
	}
	if digits == 0 {
		return
	}
	switch {
	case isDate(s):
		t.date = true
	case letters == 0 && dots == 0 && len(s) == 4 && (s[:2] == "19" || s[:2] == "20"):
		t.year, t.num = true, true
	case letters == 0 && dots <= 1 && onlyDigitsDots(s):
		t.num = true
		if dots == 1 {
			t.ver = true
		}
	case isVersion(s):
		t.ver = true
	case hex && letters > 0 && len(s) >= 7 && len(s) <= 40:
		t.sha = true
	}
}

func onlyDigitsDots(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] != '.' && (s[i] < '0' || s[i] > '9') {
			return false
		}
	}
	return true
}

// isVersion: v2, v1.2, 2.31.0, 1.2.x, 3.x, 2.0.0-rc1.
func isVersion(s string) bool {
	s = strings.TrimPrefix(s, "v")
	if s == "" || s[0] < '0' || s[0] > '9' {
		return false
	}
	if k := strings.IndexByte(s, '-'); k > 0 {
		s = s[:k]
	}
	for part := range strings.SplitSeq(s, ".") {
		if part == "x" || part == "*" {
			continue
		}
		if part == "" || !onlyDigitsDots(part) {
			return false
		}
	}
	return true
}

// isDate: 2024-03-01, 2024/03/01.
func isDate(s string) bool {
	if len(s) != 10 || (s[4] != '-' && s[4] != '/') || s[7] != s[4] {
		return false
	}
	for i, c := range []byte(s) {
		if i == 4 || i == 7 {
			continue
		}
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isSymbolShape decides whether a trimmed word looks like a code identifier
// by its spelling alone.
func isSymbolShape(w string) bool {
	if len(w) < 2 || strings.Contains(w, "://") || strings.HasPrefix(w, "www.") {
		return false
	}
	low := strings.ToLower(w)
	if brands[low] || abbreviations[low] || primitives[low] {
		return false
	}
	switch {
	case strings.Contains(w, "::"):
		return isIdentPath(w)
	case strings.Contains(w, "/"):
		return isPath(w, low)
	case strings.Contains(w, "."):
		return isDotted(w, low)
	case strings.Contains(w, "-"):
		return isHeaderName(w)
	}
	if !isIdent(w) {
		return false
	}
	if strings.Contains(w, "_") {
		return isSnake(w)
	}
	return isCamel(w) || isAlnumMix(w)
}

// isSnake: snake_case, SCREAMING_CASE, __dunder__ — but not _emphasis_.
func isSnake(w string) bool {
	hasLetter := false
	for _, r := range w {
		if unicode.IsLetter(r) {
			hasLetter = true
			break
		}
	}
	if !hasLetter {
		return false
	}
	inner := strings.Trim(w, "_")
	if strings.HasPrefix(w, "_") && strings.HasSuffix(w, "_") && !strings.HasPrefix(w, "__") && !strings.Contains(inner, "_") {
		return false // markdown _emphasis_
	}
	return true
}

// isCamel: an uppercase letter inside the word after a lowercase letter or
// digit (getUser, JsonDecodeError), or an acronym run followed by a
// lowercase word (HTTPServer). Plain capitals (Python) and plural acronyms
// (APIs) are not.
func isCamel(w string) bool {
	n := len(w)
	if n >= 3 && w[n-1] == 's' && isUpperASCII(w[:n-1]) {
		return false
	}
	for i := 1; i < n; i++ {
		c := w[i]
		if c < 'A' || c > 'Z' {
			continue
		}
		p := w[i-1]
		if p >= 'a' && p <= 'z' || p >= '0' && p <= '9' {
			return true
		}
		if p >= 'A' && p <= 'Z' && i+1 < n && w[i+1] >= 'a' && w[i+1] <= 'z' {
			return true
		}
	}
	return false
}

func isUpperASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	return s != ""
}

// isAlnumMix: a word starting with a letter that mixes letters and digits
// (utf8, sha256, base64, urllib3), not a version (v2) or unit (100ms).
func isAlnumMix(w string) bool {
	digits, letters := 0, 0
	for i := 0; i < len(w); i++ {
		switch c := w[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			letters++
		}
	}
	if digits == 0 || letters == 0 {
		return false
	}
	first, _ := utf8.DecodeRuneInString(w)
	if !unicode.IsLetter(first) {
		return false
	}
	return !isVersion(strings.ToLower(w))
}

// isDotted: a.b, self.foo, os.path.join, sessions.py — not e.g. or U.S.
// (see abbreviations), not 1.2.3.
func isDotted(w, low string) bool {
	parts := strings.Split(w, ".")
	for i, p := range parts {
		if p == "" {
			return false
		}
		if i == 0 && !isIdent(p) {
			return false
		}
		if i > 0 && !isIdentTail(p) {
			return false
		}
	}
	// node.js, vue.js, asp.net are product names.
	switch low {
	case "node.js", "vue.js", "next.js", "nuxt.js", "react.js", "express.js", "asp.net", "three.js", "d3.js":
		return false
	}
	return true
}

// isIdentTail: [A-Za-z0-9_$]+ (a part after a dot may start with a digit:
// v1.Foo is rare but x.0 is a tuple index).
func isIdentTail(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isIdentByte(s[i]) {
			return false
		}
	}
	return s != ""
}

// isPath: requests/adapters.py, pkg/fusion, internal/store — not and/or.
func isPath(w, low string) bool {
	if slashWords[low] {
		return false
	}
	segs := strings.Split(strings.Trim(w, "/"), "/")
	if len(segs) < 2 {
		return false
	}
	for _, s := range segs {
		if s == "" || s == "." || s == ".." {
			continue
		}
		for i := 0; i < len(s); i++ {
			if c := s[i]; !isIdentByte(c) && c != '.' && c != '-' {
				return false
			}
		}
	}
	last := segs[len(segs)-1]
	if k := strings.LastIndexByte(last, '.'); k > 0 && k < len(last)-1 {
		ext := last[k+1:]
		if isIdent(ext) {
			return true
		}
	}
	if strings.HasPrefix(w, "./") || strings.HasPrefix(w, "../") {
		return true
	}
	if len(segs) >= 3 || codeDirs[strings.ToLower(segs[0])] {
		return true
	}
	for _, s := range segs {
		if strings.Contains(s, "_") || strings.Contains(s, ".") {
			return true
		}
	}
	return false
}

// isHeaderName: Title-Case words joined by hyphens (Content-Type,
// X-Forwarded-For). Lowercase compounds (built-in) are English.
func isHeaderName(w string) bool {
	parts := strings.Split(w, "-")
	if len(parts) < 2 {
		return false
	}
	for _, p := range parts {
		if p == "" || p[0] < 'A' || p[0] > 'Z' {
			return false
		}
		for i := 1; i < len(p); i++ {
			if c := p[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				return false
			}
		}
	}
	return true
}
