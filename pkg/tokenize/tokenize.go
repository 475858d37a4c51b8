// Package tokenize turns source code and prose into search terms. It is
// identifier-aware: camelCase, PascalCase, snake_case, kebab-case, digits and
// paths are split into lowercase sub-words, and an identifier that splits into
// more than one sub-word is also kept whole, so the query "load config" reaches
// both load_config and ConfigLoader while the query "load_config" matches the
// exact identifier with a bonus (its whole token is rarer, so its idf is
// higher).
//
// Rules, applied identically by Tokens (indexing) and QueryTokens (queries):
//
//   - A word is a maximal run of letters, digits, combining marks and '_'.
//     Everything else ('.', '/', '-', spaces, punctuation) only separates
//     words, so "src/requests/utils.py" gives src, requests, utils, py and
//     "load-config" gives load, config (no whole token across separators).
//   - A word is split at '_', at lower→upper case changes ("parseHTTP" →
//     parse, http), before the last capital of an upper-case run followed by
//     lower case ("HTTPServer" → http, server) and at letter↔digit changes
//     ("utf8" → utf, 8). An acronym plural stays one part ("URLs" → urls).
//   - If a word splits into more than one part, the whole word, lowercased and
//     with leading/trailing '_' trimmed, is emitted first ("utf8",
//     "load_config", "configloader"), then its parts in order.
//   - Tokens of one letter are dropped; one-digit tokens are kept ("2").
//     Tokens longer than MaxTokenLen runes (hashes, base64) are dropped.
//   - English stopwords (the, a, of, to, ...) are dropped everywhere.
//   - Light plural stemming on ASCII tokens longer than three bytes:
//     "ies" → "y", "sses" → "ss", "xes" → "x", else a final "s" is dropped,
//     except after "s", "u" or "i" (class, status, analysis stay). No "ing" or
//     "ed" stemming: it breaks code words such as string, embed and seed.
//
// QueryTokens additionally drops question and code filler words (how, where,
// function, method, ...) and duplicates.
package tokenize

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxTokenLen is the longest token, in runes, that is kept.
const MaxTokenLen = 64

// Tokens returns the index terms of s: every token in order, duplicates kept.
func Tokens(s string) []string {
	t := tokenizer{out: make([]string, 0, len(s)/5+1)}
	t.run(s)
	return t.out
}

// QueryTokens returns the query terms of s: the tokens of Tokens, with
// duplicates and stopwords (English and query filler such as "how",
// "function") removed, in order of first appearance. If that leaves nothing,
// the tokens with only English stopwords removed are used, so a query that
// consists only of filler words ("find") still searches for them.
func QueryTokens(s string) []string {
	all := Tokens(s)
	seen := make(map[string]bool, len(all))
	var out, fallback []string
	for _, w := range all {
		if seen[w] {
			continue
		}
		seen[w] = true
		fallback = append(fallback, w)
		if !queryStop[w] {
			out = append(out, w)
		}
	}
	if len(out) == 0 {
		return fallback
	}
	return out
}

// Split returns the lowercased sub-words of ident in order, without the
// whole-word token, without stemming and without dropping stopwords or short
// parts: Split("parseHTTPRequest2") is [parse http request 2]. Characters
// other than letters, digits and marks separate sub-words.
func Split(ident string) []string {
	var out []string
	var sc []rclass
	forEachWord(ident, func(word string) {
		lw, same := lower(word)
		sc = classify(word, sc[:0])
		splitParts(word, sc, func(i, j int) {
			out = append(out, part(word, lw, same, i, j))
		})
	})
	return out
}

// IsStopword reports whether w (lowercase) is dropped from queries: an
// English stopword or a query filler word. Only English stopwords are dropped
// at index time.
func IsStopword(w string) bool { return queryStop[w] }

type tokenizer struct {
	out []string
	sc  []rclass
}

func (t *tokenizer) run(s string) {
	forEachWord(s, t.word)
}

// word emits the tokens of one word.
func (t *tokenizer) word(w string) {
	lw, same := lower(w)
	t.sc = classify(w, t.sc[:0])
	n := 0
	first := -1
	firstJ := 0
	splitParts(w, t.sc, func(i, j int) {
		if n == 0 {
			first, firstJ = i, j
		} else {
			if n == 1 {
				// More than one part: emit the whole word first.
				t.emit(wholeWord(w, lw, same))
				t.emit(part(w, lw, same, first, firstJ))
			}
			t.emit(part(w, lw, same, i, j))
		}
		n++
	})
	if n == 1 {
		t.emit(part(w, lw, same, first, firstJ))
	}
}

func (t *tokenizer) emit(tok string) {
	if keep(tok) {
		t.out = append(t.out, stem(tok))
	}
}

// keep reports whether an index token survives length and stopword filters.
func keep(tok string) bool {
	switch len(tok) {
	case 0:
		return false
	case 1:
		return tok[0] >= '0' && tok[0] <= '9'
	}
	n := utf8.RuneCountInString(tok)
	if n == 1 {
		r, _ := utf8.DecodeRuneInString(tok)
		return unicode.IsDigit(r)
	}
	return n <= MaxTokenLen && (len(tok) > maxStopLen || !englishStop[tok])
}

// stem applies the light plural stemming described in the package doc.
func stem(t string) string {
	n := len(t)
	if n <= 3 || t[n-1] != 's' {
		return t
	}
	for i := 0; i < n; i++ {
		if t[i] >= utf8.RuneSelf {
			return t
		}
	}
	switch {
	case n > 4 && strings.HasSuffix(t, "ies"):
		return t[:n-3] + "y"
	case strings.HasSuffix(t, "sses"), strings.HasSuffix(t, "xes"):
		return t[:n-2]
	}
	switch t[n-2] {
	case 's', 'u', 'i', '_':
		return t
	}
	if c := t[n-2]; c >= '0' && c <= '9' {
		return t
	}
	return t[:n-1]
}

// lower returns w lowercased and whether byte offsets are unchanged, so
// that parts can be sliced out of the lowered word.
func lower(w string) (string, bool) {
	ascii, upper := true, false
	for i := 0; i < len(w); i++ {
		c := w[i]
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
		if 'A' <= c && c <= 'Z' {
			upper = true
		}
	}
	if ascii && !upper {
		return w, true
	}
	lw := strings.ToLower(w)
	return lw, len(lw) == len(w)
}

// part returns the lowercased bytes [i,j) of w.
func part(w, lw string, same bool, i, j int) string {
	if same {
		return lw[i:j]
	}
	return strings.ToLower(w[i:j])
}

func wholeWord(w, lw string, same bool) string {
	if same {
		return strings.Trim(lw, "_")
	}
	return strings.ToLower(strings.Trim(w, "_"))
}

// Rune classes used for splitting.
const (
	cLower uint8 = iota // lowercase and caseless letters, marks
	cUpper
	cDigit
	cSep // '_'
)

type rclass struct {
	c   uint8
	off int32 // byte offset of the rune in the word
}

func classify(w string, sc []rclass) []rclass {
	for i := 0; i < len(w); {
		c := w[i]
		var cl uint8
		size := 1
		switch {
		case c >= utf8.RuneSelf:
			r, sz := utf8.DecodeRuneInString(w[i:])
			size = sz
			switch {
			case unicode.IsUpper(r) || unicode.IsTitle(r):
				cl = cUpper
			case unicode.IsDigit(r):
				cl = cDigit
			default:
				cl = cLower
			}
		case 'a' <= c && c <= 'z':
			cl = cLower
		case 'A' <= c && c <= 'Z':
			cl = cUpper
		case '0' <= c && c <= '9':
			cl = cDigit
		default:
			cl = cSep
		}
		sc = append(sc, rclass{cl, int32(i)})
		i += size
	}
	return sc
}

// splitParts calls emit with the byte range of each part of word w, whose
// runes are classified in sc.
func splitParts(w string, sc []rclass, emit func(i, j int)) {
	start := -1 // rune index of the current part's start
	end := func(k int) {
		if start >= 0 {
			emit(int(sc[start].off), offAt(w, sc, k))
			start = -1
		}
	}
	for k := 0; k < len(sc); k++ {
		cur := sc[k].c
		if cur == cSep {
			end(k)
			continue
		}
		if start < 0 {
			start = k
			continue
		}
		prev := sc[k-1].c
		switch {
		case (cur == cDigit) != (prev == cDigit):
			end(k)
			start = k
		case cur == cUpper && prev == cLower:
			end(k)
			start = k
		case cur == cUpper && prev == cUpper && k+1 < len(sc) && sc[k+1].c == cLower && !acronymPlural(w, sc, k+1):
			end(k)
			start = k
		}
	}
	end(len(sc))
}

// acronymPlural reports whether the lowercase run starting at rune k is a
// lone "s" closing an acronym: "URLs", "IDsFor".
func acronymPlural(w string, sc []rclass, k int) bool {
	if w[sc[k].off] != 's' {
		return false
	}
	return k+1 == len(sc) || sc[k+1].c != cLower
}

func offAt(w string, sc []rclass, k int) int {
	if k >= len(sc) {
		return len(w)
	}
	return int(sc[k].off)
}

// forEachWord calls f with each maximal run of letters, digits, marks and '_'.
func forEachWord(s string, f func(string)) {
	for i := 0; ; {
		w, next, ok := NextWord(s, i)
		if !ok {
			return
		}
		f(w)
		i = next
	}
}

// NextWord returns the first word of s at or after byte from (a maximal
// run of letters, digits, marks and '_', as Tokens splits text into
// words) and the byte offset after it; ok is false when there is none.
// Tokens(s) is the concatenation of Word over the words of s in order.
func NextWord(s string, from int) (word string, next int, ok bool) {
	start := -1
	for i := from; i < len(s); {
		c := s[i]
		in := false
		size := 1
		if c < utf8.RuneSelf {
			in = wordByte[c]
		} else {
			r, sz := utf8.DecodeRuneInString(s[i:])
			size = sz
			in = r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r))
		}
		if in {
			if start < 0 {
				start = i
			}
		} else if start >= 0 {
			return s[start:i], i, true
		}
		i += size
	}
	if start >= 0 {
		return s[start:], len(s), true
	}
	return "", len(s), false
}

// A Tokenizer returns the tokens of one word at a time, reusing its
// buffers: Word over the words of a text (NextWord) gives Tokens of the
// text. The zero value is ready to use; it is not safe for concurrent use.
type Tokenizer struct{ t tokenizer }

// Word returns the tokens of word w, as Tokens(w) for a w of one word;
// the slice is valid until the next call.
func (z *Tokenizer) Word(w string) []string {
	z.t.out = z.t.out[:0]
	z.t.word(w)
	return z.t.out
}

var wordByte = func() (t [utf8.RuneSelf]bool) {
	for c := 0; c < utf8.RuneSelf; c++ {
		t[c] = c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')
	}
	return t
}()

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

// maxStopLen is the byte length of the longest word in englishStop.
const maxStopLen = 5

// englishStop is dropped at index and query time. "no", "not", "if" and
// "then" are kept: they carry meaning in code ("notFound", "ifNoneMatch").
var englishStop = set(
	"a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "for",
	"in", "into", "is", "it", "its", "of", "on", "or", "such", "that", "the",
	"their", "there", "these", "they", "this", "those", "to", "was", "were",
	"will", "with",
)

// queryStop is dropped from queries: englishStop plus question and code
// filler words.
var queryStop = func() map[string]bool {
	m := set(
		"how", "what", "where", "which", "who", "why", "when", "doe", "does",
		"do", "did", "can", "should", "would", "could", "we", "you", "me",
		"my", "our", "your", "from", "about", "via", "code", "function",
		"method", "implementation", "implement", "implemented", "find",
		"show", "here", "some",
	)
	for w := range englishStop {
		m[w] = true
	}
	return m
}()
