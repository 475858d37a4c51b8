package query

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// errFloat is returned by AppendJSON for a NaN or infinite number, which
// JSON cannot hold (encoding/json fails on it too).
var errFloat = errors.New("query: response holds a NaN or infinite number")

// AppendJSON appends the JSON encoding of r to b, byte for byte what
// encoding/json's Marshal gives (fields in order, omitempty as tagged, map
// keys sorted, HTML-safe string escaping, invalid UTF-8 as U+FFFD,
// numbers in the same form). A server answers every query with one, and
// reflection over the response's fields is most of what encoding/json
// costs beyond the escaping of its texts. It fails only where Marshal
// does, on a NaN or infinite score, and then returns b unchanged.
// TestAppendJSON compares it with Marshal.
func (r *Response) AppendJSON(b []byte) ([]byte, error) {
	start := len(b)
	b = append(b, `{"query":`...)
	b = appendJSONString(b, r.Query)
	b = append(b, `,"repo":`...)
	b = appendJSONString(b, r.Repo)
	b = append(b, `,"commit":`...)
	b = appendJSONString(b, r.Commit)
	if len(r.Repos) > 0 {
		b = append(b, `,"repos":`...)
		b = appendJSONStrings(b, r.Repos)
	}
	b = append(b, `,"trigger":`...)
	b = appendJSONString(b, r.Trigger)
	b = append(b, `,"confidence":`...)
	var ok bool
	if b, ok = appendJSONFloat(b, r.Confidence); !ok {
		return b[:start], errFloat
	}
	if len(r.Symbols) > 0 {
		b = append(b, `,"symbols":`...)
		b = appendJSONStrings(b, r.Symbols)
	}
	b = append(b, `,"arms":`...)
	b = appendJSONStrings(b, r.Arms)
	b = append(b, `,"budget":`...)
	b = strconv.AppendInt(b, int64(r.Budget), 10)
	b = append(b, `,"tokens":`...)
	b = strconv.AppendInt(b, int64(r.Tokens), 10)
	b = append(b, `,"chunks":`...)
	// Where each chunk's escaped text lies in b: the context is usually
	// those texts joined by the packer's separator, and is copied from
	// them instead of escaped a second time.
	var arr [64][2]int
	texts := arr[:0]
	if r.Chunks == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Chunks {
			if i > 0 {
				b = append(b, ',')
			}
			var at int
			if b, at, ok = r.Chunks[i].appendJSON(b); !ok {
				return b[:start], errFloat
			}
			texts = append(texts, [2]int{at, len(b) - 1})
		}
		b = append(b, ']')
	}
	b = append(b, `,"files":`...)
	if r.Files == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range r.Files {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = r.Files[i].appendJSON(b); !ok {
				return b[:start], errFloat
			}
		}
		b = append(b, ']')
	}
	if len(r.Commits) > 0 {
		// Only history questions list commits: encoding/json's own
		// encoding of them costs nothing that matters.
		cs, err := json.Marshal(r.Commits)
		if err != nil {
			return b[:start], err
		}
		b = append(b, `,"commits":`...)
		b = append(b, cs...)
	}
	b = append(b, `,"dropped":`...)
	b = strconv.AppendInt(b, int64(r.Dropped), 10)
	b = append(b, `,"timings_us":`...)
	b = appendJSONTimings(b, r.Timings)
	b = append(b, `,"context":`...)
	if r.JoinsTexts() {
		b = append(b, '"')
		for i, t := range texts {
			if i > 0 {
				b = append(b, `\n\n`...)
			}
			// The quotes of the text are left out; escaping is the
			// same piece by piece, since the pieces meet at ASCII.
			b = append(b, b[t[0]+1:t[1]-1]...)
		}
		b = append(b, '"')
	} else {
		b = appendJSONString(b, r.Context)
	}
	if len(r.AlreadySent) > 0 {
		b = append(b, `,"already_sent":`...)
		b = appendJSONStrings(b, r.AlreadySent)
	}
	if r.TokensSaved != 0 {
		b = append(b, `,"tokens_saved":`...)
		b = strconv.AppendInt(b, int64(r.TokensSaved), 10)
	}
	if r.Stale {
		b = append(b, `,"stale":true`...)
	}
	if r.StaleReason != "" {
		b = append(b, `,"stale_reason":`...)
		b = appendJSONString(b, r.StaleReason)
	}
	if r.Degraded != "" {
		b = append(b, `,"degraded":`...)
		b = appendJSONString(b, r.Degraded)
	}
	return append(b, '}'), nil
}

// JoinsTexts reports whether the context is the chunks' texts joined by
// pack.Sep ("\n\n"), as PackAll renders it with no preamble.
func (r *Response) JoinsTexts() bool {
	if len(r.Chunks) == 0 {
		return false
	}
	ctx := r.Context
	for i := range r.Chunks {
		if i > 0 {
			var ok bool
			if ctx, ok = strings.CutPrefix(ctx, "\n\n"); !ok {
				return false
			}
		}
		var ok bool
		if ctx, ok = strings.CutPrefix(ctx, r.Chunks[i].Text); !ok {
			return false
		}
	}
	return ctx == ""
}

// appendJSON appends c's encoding and returns where its text's encoding
// (quotes included) starts; it ends at the closing brace.
func (c *Chunk) appendJSON(b []byte) ([]byte, int, bool) {
	b = append(b, `{"repo":`...)
	b = appendJSONString(b, c.Repo)
	b = append(b, `,"commit":`...)
	b = appendJSONString(b, c.Commit)
	b = append(b, `,"path":`...)
	b = appendJSONString(b, c.Path)
	b = append(b, `,"start_line":`...)
	b = strconv.AppendInt(b, int64(c.StartLine), 10)
	b = append(b, `,"end_line":`...)
	b = strconv.AppendInt(b, int64(c.EndLine), 10)
	b = append(b, `,"symbol":`...)
	b = appendJSONString(b, c.Symbol)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, c.Kind)
	b = append(b, `,"granularity":`...)
	b = appendJSONString(b, c.Granularity)
	b = append(b, `,"tokens":`...)
	b = strconv.AppendInt(b, int64(c.Tokens), 10)
	b = append(b, `,"score":`...)
	b, ok := appendJSONFloat(b, c.Score)
	if !ok {
		return b, 0, false
	}
	b = append(b, `,"signals":`...)
	b = appendJSONStrings(b, c.Signals)
	b = append(b, `,"provenance":`...)
	b = appendJSONString(b, c.Provenance)
	b = append(b, `,"text":`...)
	at := len(b)
	b = appendJSONString(b, c.Text)
	return append(b, '}'), at, true
}

func (f *File) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, '{')
	if f.Repo != "" {
		b = append(b, `"repo":`...)
		b = appendJSONString(b, f.Repo)
		b = append(b, ',')
	}
	b = append(b, `"path":`...)
	b = appendJSONString(b, f.Path)
	b = append(b, `,"score":`...)
	b, ok := appendJSONFloat(b, f.Score)
	if !ok {
		return b, false
	}
	b = append(b, `,"signals":`...)
	b = appendJSONStrings(b, f.Signals)
	return append(b, '}'), true
}

// appendJSONTimings encodes a map as encoding/json does: keys sorted.
func appendJSONTimings(b []byte, m map[string]int) []byte {
	if m == nil {
		return append(b, "null"...)
	}
	var arr [16]string
	keys := arr[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(m[k]), 10)
	}
	return append(b, '}')
}

func appendJSONStrings(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendJSONFloat formats f as encoding/json does (ES6 number form); false
// for NaN and infinities.
func appendJSONFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 -> e-9, as encoding/json does.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

// jsonSafe marks the ASCII bytes a JSON string holds as they are with
// HTML-safe escaping: printable, and none of " \ < > &.
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// appendJSONString quotes s as encoding/json does with HTML escaping.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default: // other control bytes, < > &
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
