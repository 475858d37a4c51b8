// Package wordpiece is a BERT WordPiece tokenizer read from a Hugging Face
// tokenizer.json: the BertNormalizer (clean text, CJK spacing, accent
// stripping, lower-casing), the BertPreTokenizer (split at whitespace and
// punctuation), greedy longest-match WordPiece with a "##" continuation
// prefix, and the [CLS] ... [SEP] template. It gives the same ids as the
// reference tokenizers library (checked token-for-token in the tests on
// chunks of this repository's own code).
package wordpiece

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer is safe for concurrent use.
type Tokenizer struct {
	vocab    map[string]int32 // word-initial pieces
	cont     map[string]int32 // continuation pieces, without the prefix
	unk      int32
	cls, sep int32
	pad      int32
	maxChars int

	clean, chinese, strip, lower bool
}

type file struct {
	Normalizer *struct {
		Type          string `json:"type"`
		CleanText     *bool  `json:"clean_text"`
		HandleChinese *bool  `json:"handle_chinese_chars"`
		StripAccents  *bool  `json:"strip_accents"`
		Lowercase     *bool  `json:"lowercase"`
	} `json:"normalizer"`
	PreTokenizer *struct {
		Type string `json:"type"`
	} `json:"pre_tokenizer"`
	Model struct {
		Type                    string           `json:"type"`
		UnkToken                string           `json:"unk_token"`
		ContinuingSubwordPrefix string           `json:"continuing_subword_prefix"`
		MaxInputCharsPerWord    int              `json:"max_input_chars_per_word"`
		Vocab                   map[string]int32 `json:"vocab"`
	} `json:"model"`
}

// Load reads a tokenizer.json.
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("wordpiece: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("wordpiece: %s: %w", path, err)
	}
	return t, nil
}

func boolOr(p *bool, d bool) bool {
	if p == nil {
		return d
	}
	return *p
}

// Parse reads the JSON of a tokenizer.json. Only BERT-style WordPiece
// tokenizers are accepted; anything else is an error, not a guess.
func Parse(data []byte) (*Tokenizer, error) {
	var f file
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	if f.Model.Type != "WordPiece" {
		return nil, fmt.Errorf("model type %q: only WordPiece is supported", f.Model.Type)
	}
	if f.PreTokenizer != nil && f.PreTokenizer.Type != "BertPreTokenizer" {
		return nil, fmt.Errorf("pre-tokenizer %q: only BertPreTokenizer is supported", f.PreTokenizer.Type)
	}
	t := &Tokenizer{vocab: map[string]int32{}, cont: map[string]int32{}, maxChars: f.Model.MaxInputCharsPerWord}
	if n := f.Normalizer; n != nil {
		if n.Type != "BertNormalizer" {
			return nil, fmt.Errorf("normalizer %q: only BertNormalizer is supported", n.Type)
		}
		t.clean = boolOr(n.CleanText, true)
		t.chinese = boolOr(n.HandleChinese, true)
		t.lower = boolOr(n.Lowercase, true)
		t.strip = boolOr(n.StripAccents, t.lower) // as BERT: follows lowercase when unset
	}
	if t.maxChars <= 0 {
		t.maxChars = 100
	}
	prefix := f.Model.ContinuingSubwordPrefix
	if prefix == "" {
		prefix = "##"
	}
	for tok, id := range f.Model.Vocab {
		if rest, ok := strings.CutPrefix(tok, prefix); ok && rest != "" {
			t.cont[rest] = id
		} else {
			t.vocab[tok] = id
		}
	}
	var ok [4]bool
	unk := f.Model.UnkToken
	if unk == "" {
		unk = "[UNK]"
	}
	for i, s := range []string{unk, "[CLS]", "[SEP]", "[PAD]"} {
		var id int32
		id, ok[i] = t.vocab[s]
		switch i {
		case 0:
			t.unk = id
		case 1:
			t.cls = id
		case 2:
			t.sep = id
		case 3:
			t.pad = id
		}
	}
	if !ok[0] || !ok[1] || !ok[2] {
		return nil, fmt.Errorf("vocabulary lacks %s, [CLS] or [SEP]", unk)
	}
	return t, nil
}

// Pad is the id of [PAD] (0 if the vocabulary has none).
func (t *Tokenizer) Pad() int32 { return t.pad }

// Encode returns [CLS] ids... [SEP] for text, at most maxLen ids in all
// (maxLen < 3 or 0: no limit), cutting the text's tokens at the end as the
// reference tokenizer's right truncation does.
func (t *Tokenizer) Encode(text string, maxLen int) []int32 {
	limit := -1
	if maxLen >= 3 {
		limit = maxLen - 2
	}
	ids := []int32{t.cls}
	t.words(t.normalize(text), func(w string) bool {
		ids = t.wordPiece(ids, w)
		return limit < 0 || len(ids)-1 < limit
	})
	if limit >= 0 && len(ids)-1 > limit {
		ids = ids[:limit+1]
	}
	return append(ids, t.sep)
}

// normalize applies the BertNormalizer steps in the reference's order:
// clean text, space out CJK ideographs, strip accents (NFD, drop Mn),
// lower-case.
func (t *Tokenizer) normalize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	ascii := true
	for _, r := range s {
		if t.clean {
			if r == 0 || r == utf8.RuneError || isControl(r) {
				continue
			}
			if isWhitespace(r) {
				r = ' '
			}
		}
		if t.chinese && isChinese(r) {
			b.WriteByte(' ')
			b.WriteRune(r)
			b.WriteByte(' ')
			ascii = false
			continue
		}
		if r >= utf8.RuneSelf {
			ascii = false
		}
		b.WriteRune(r)
	}
	s = b.String()
	if t.strip && !ascii {
		d := norm.NFD.String(s)
		b.Reset()
		for _, r := range d {
			if !unicode.Is(unicode.Mn, r) {
				b.WriteRune(r)
			}
		}
		s = b.String()
	}
	if t.lower {
		if ascii {
			s = strings.ToLower(s)
		} else {
			s = strings.Map(unicode.ToLower, s)
		}
	}
	return s
}

// words calls f with each pre-token: runs split at whitespace (dropped)
// and punctuation (each mark its own token), until f returns false.
func (t *Tokenizer) words(s string, f func(string) bool) {
	start := -1
	for i, r := range s {
		switch {
		case isWhitespace(r):
			if start >= 0 {
				if !f(s[start:i]) {
					return
				}
				start = -1
			}
		case isPunct(r):
			if start >= 0 {
				if !f(s[start:i]) {
					return
				}
				start = -1
			}
			if !f(s[i : i+utf8.RuneLen(r)]) {
				return
			}
		default:
			if start < 0 {
				start = i
			}
		}
	}
	if start >= 0 {
		f(s[start:])
	}
}

// wordPiece appends the pieces of one word, greedy longest match first; a
// word with an unmatchable part, or longer than maxChars runes, is [UNK].
func (t *Tokenizer) wordPiece(ids []int32, w string) []int32 {
	if utf8.RuneCountInString(w) > t.maxChars {
		return append(ids, t.unk)
	}
	n := len(ids)
	for start := 0; start < len(w); {
		m := t.vocab
		if start > 0 {
			m = t.cont
		}
		end := len(w)
		found := false
		for end > start {
			if id, ok := m[w[start:end]]; ok {
				ids = append(ids, id)
				found = true
				break
			}
			_, size := utf8.DecodeLastRuneInString(w[start:end])
			end -= size
		}
		if !found {
			return append(ids[:n], t.unk)
		}
		start = end
	}
	return ids
}

func isWhitespace(r rune) bool {
	return r == ' ' || r == '\t' || r == '\n' || r == '\r' || unicode.IsSpace(r)
}

// isControl is the reference's "other" categories (Cc, Cf, Co, Cs and
// unassigned), except tab, newline and carriage return.
func isControl(r rune) bool {
	switch r {
	case '\t', '\n', '\r':
		return false
	}
	if r < utf8.RuneSelf {
		return r < 0x20 || r == 0x7f
	}
	if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs) {
		return true
	}
	return !unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Z)
}

func isPunct(r rune) bool {
	if r < utf8.RuneSelf {
		return (r >= 33 && r <= 47) || (r >= 58 && r <= 64) || (r >= 91 && r <= 96) || (r >= 123 && r <= 126)
	}
	return unicode.IsPunct(r)
}

func isChinese(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) ||
		(r >= 0x3400 && r <= 0x4DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) ||
		(r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) ||
		(r >= 0x2B820 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) ||
		(r >= 0x2F800 && r <= 0x2FA1F)
}
