package wordpiece

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// tiny is a hand-made BERT-style tokenizer.json.
const tiny = `{
 "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
 "pre_tokenizer": {"type": "BertPreTokenizer"},
 "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 12,
  "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "parse": 4, "##config": 5, "config": 6, "(": 7, ")": 8,
            "cafe": 9, "日": 10, "本": 11, "http": 12, "##s": 13, "_": 14, "a": 15, "##a": 16, "par": 17, "##se": 18}}
}`

func TestEncodeTiny(t *testing.T) {
	tok, err := Parse([]byte(tiny))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   string
		max  int
		want []int32
	}{
		{"", 0, []int32{2, 3}},
		{"parseConfig()", 0, []int32{2, 4, 5, 7, 8, 3}},             // longest match first, ## continuation
		{"PARSE config", 0, []int32{2, 4, 6, 3}},                    // lower-cased
		{"Café", 0, []int32{2, 9, 3}},                               // accent stripped
		{"日本", 0, []int32{2, 10, 11, 3}},                            // CJK split per ideograph
		{"https_x", 0, []int32{2, 12, 13, 14, 1, 3}},                // punctuation isolated, unknown word -> [UNK]
		{"parsex", 0, []int32{2, 1, 3}},                             // one unmatchable piece: the whole word is [UNK]
		{"aaaaaaaaaaaaa aaaa", 0, []int32{2, 1, 15, 16, 16, 16, 3}}, // over 12 chars: [UNK]
		{"parse\x00\u200b(\t)", 0, []int32{2, 4, 7, 8, 3}},          // control and format characters dropped
		{"parse parse parse parse", 4, []int32{2, 4, 4, 3}},         // truncated to 4 ids in all
		{"parseconfig parse", 3, []int32{2, 4, 3}},                  // truncation may cut inside a word's pieces
	} {
		if got := tok.Encode(tc.in, tc.max); !slices.Equal(got, tc.want) {
			t.Errorf("Encode(%q, %d) = %v, want %v", tc.in, tc.max, got, tc.want)
		}
	}
}

func TestParseRejects(t *testing.T) {
	for _, bad := range []string{
		`{"model": {"type": "BPE", "vocab": {}}}`,
		`{"pre_tokenizer": {"type": "ByteLevel"}, "model": {"type": "WordPiece", "vocab": {"[UNK]":0,"[CLS]":1,"[SEP]":2}}}`,
		`{"model": {"type": "WordPiece", "vocab": {"a": 0}}}`,
		`not json`,
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%s) accepted", bad)
		}
	}
}

// refTokenizer finds the default model's tokenizer.json (make model), or
// the one CODECTX_TOKENIZER names.
func refTokenizer(t testing.TB) string {
	if p := os.Getenv("CODECTX_TOKENIZER"); p != "" {
		return p
	}
	dir, _ := os.Getwd()
	for ; dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, ".cache", "models", "bge-small-en-v1.5-q", "tokenizer.json")
			if _, err := os.Stat(p); err == nil {
				return p
			}
			break
		}
	}
	t.Skip("no tokenizer.json: run `make model` (or set CODECTX_TOKENIZER) to check against the reference ids")
	return ""
}

// TestReference checks every case of testdata/chunks.json (chunks of this
// repository's code and hand-written edge cases, with the ids the reference
// tokenizers library gave them: scripts/tokenizer-fixture.py) token for token.
func TestReference(t *testing.T) {
	tok, err := Load(refTokenizer(t))
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("testdata/chunks.json")
	if err != nil {
		t.Fatal(err)
	}
	var fx struct {
		MaxLen int `json:"max_len"`
		Cases  []struct {
			Text string  `json:"text"`
			IDs  []int32 `json:"ids"`
		} `json:"cases"`
	}
	if err := json.Unmarshal(data, &fx); err != nil {
		t.Fatal(err)
	}
	if len(fx.Cases) < 300 {
		t.Fatalf("only %d cases", len(fx.Cases))
	}
	bad := 0
	for i, c := range fx.Cases {
		got := tok.Encode(c.Text, fx.MaxLen)
		if !slices.Equal(got, c.IDs) {
			bad++
			if bad <= 5 {
				j := 0
				for j < min(len(got), len(c.IDs)) && got[j] == c.IDs[j] {
					j++
				}
				t.Errorf("case %d (%q...): ids differ at %d: got %v, want %v", i, head(c.Text), j, got[j:min(j+5, len(got))], c.IDs[j:min(j+5, len(c.IDs))])
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d cases differ from the reference", bad, len(fx.Cases))
	}
}

func head(s string) string {
	r := []rune(s)
	return string(r[:min(40, len(r))])
}

func BenchmarkEncode(b *testing.B) {
	tok, err := Load(refTokenizer(b))
	if err != nil {
		b.Fatal(err)
	}
	data, _ := os.ReadFile("wordpiece.go")
	text := string(data[:2000])
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Encode(text, 512)
	}
}
