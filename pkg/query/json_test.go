package query

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

// jsonAlphabet holds what decides how a string is escaped: quotes,
// backslashes, HTML characters, control bytes, DEL, multi-byte runes, the
// line and paragraph separators and invalid UTF-8.
var jsonAlphabet = []string{
	"a", "Z", "0", " ", "func", "\"", "\\", "<", ">", "&", "\b", "\f", "\n", "\r", "\t",
	"\x00", "\x01", "\x1f", "\x7f", "é", "日本", "😀", "\u2028", "\u2029", "\u2027", "\u202a",
	"\xff", "\xe2\x80", "\xc3", "\xed\xa0\x80", "/", "'", "{", "}", "\u0085", "\ufeff",
}

func randString(r *rand.Rand) string {
	if r.Intn(8) == 0 {
		return ""
	}
	var b strings.Builder
	for range r.Intn(30) {
		b.WriteString(jsonAlphabet[r.Intn(len(jsonAlphabet))])
	}
	return b.String()
}

func randStrings(r *rand.Rand) []string {
	switch r.Intn(4) {
	case 0:
		return nil
	case 1:
		return []string{}
	}
	out := make([]string, r.Intn(4)+1)
	for i := range out {
		out[i] = randString(r)
	}
	return out
}

func randFloat(r *rand.Rand) float64 {
	switch r.Intn(10) {
	case 0:
		return 0
	case 1:
		return math.Copysign(0, -1)
	case 2:
		return r.Float64() * 1e-7 // 'e' form, small
	case 3:
		return -r.Float64() * 1e22 // 'e' form, large
	case 4:
		return 1e21
	case 5:
		return 1e-6
	case 6:
		return float64(r.Intn(1000))
	}
	return r.NormFloat64() * math.Pow(10, float64(r.Intn(12)-6))
}

func randResponse(r *rand.Rand) *Response {
	resp := &Response{
		Query: randString(r), Repo: randString(r), Commit: randString(r), Repos: randStrings(r),
		Trigger: randString(r), Confidence: randFloat(r), Symbols: randStrings(r), Arms: randStrings(r),
		Budget: r.Intn(1 << 20), Tokens: r.Intn(9000) - 10, Dropped: r.Intn(500), Context: randString(r),
		AlreadySent: randStrings(r), Stale: r.Intn(3) == 0, StaleReason: randString(r),
	}
	if r.Intn(3) == 0 {
		resp.TokensSaved = r.Intn(100) - 50
	}
	switch r.Intn(3) {
	case 0:
	case 1:
		resp.Timings = map[string]int{}
	default:
		resp.Timings = map[string]int{}
		for range r.Intn(12) {
			resp.Timings[randString(r)] = r.Intn(1<<30) - 1<<29
		}
	}
	if r.Intn(5) > 0 {
		resp.Chunks = []Chunk{}
		for range r.Intn(5) {
			resp.Chunks = append(resp.Chunks, Chunk{
				Repo: randString(r), Commit: randString(r), Path: randString(r),
				StartLine: r.Intn(1e6) - 5, EndLine: r.Intn(1e6), Symbol: randString(r), Kind: randString(r),
				Granularity: randString(r), Tokens: r.Intn(9000), Score: randFloat(r), Signals: randStrings(r),
				Provenance: randString(r), Text: randString(r),
			})
		}
	}
	if r.Intn(5) > 0 {
		resp.Files = []File{}
		for range r.Intn(5) {
			resp.Files = append(resp.Files, File{Repo: randString(r), Path: randString(r), Score: randFloat(r), Signals: randStrings(r)})
		}
	}
	if r.Intn(4) == 0 {
		for range r.Intn(4) {
			resp.Commits = append(resp.Commits, Commit{Repo: randString(r), Hash: randString(r), When: randString(r),
				Author: randString(r), Subject: randString(r), Files: randStrings(r), Others: r.Intn(3)})
		}
	}
	// Mostly the context is the texts joined, as PackAll renders it;
	// sometimes nearly (no separator, or one text changed).
	if len(resp.Chunks) > 0 && r.Intn(4) > 0 {
		var texts []string
		for _, c := range resp.Chunks {
			texts = append(texts, c.Text)
		}
		sep := "\n\n"
		if r.Intn(5) == 0 {
			sep = []string{"", "\n", "\x80"}[r.Intn(3)]
		}
		resp.Context = strings.Join(texts, sep)
		if r.Intn(5) == 0 {
			resp.Chunks[r.Intn(len(resp.Chunks))].Text += "x"
		}
	}
	return resp
}

// TestAppendJSON checks AppendJSON against encoding/json on random
// responses: the same bytes, and the same failure on numbers JSON cannot
// hold.
func TestAppendJSON(t *testing.T) {
	r := rand.New(rand.NewSource(11))
	for i := range 20000 {
		resp := randResponse(r)
		bad := ""
		if i%50 == 0 {
			bad = []string{"confidence", "chunk", "file"}[i/50%3]
			v := []float64{math.NaN(), math.Inf(1), math.Inf(-1)}[i%3]
			switch bad {
			case "confidence":
				resp.Confidence = v
			case "chunk":
				resp.Chunks = append(resp.Chunks, Chunk{Score: v})
			default:
				resp.Files = append(resp.Files, File{Score: v})
			}
		}
		want, werr := json.Marshal(resp)
		prefix := []byte("prefix")
		got, err := resp.AppendJSON(prefix)
		if (err != nil) != (werr != nil) {
			t.Fatalf("case %d (%s): AppendJSON error %v, Marshal error %v", i, bad, err, werr)
		}
		if err != nil {
			if !bytes.Equal(got, prefix) {
				t.Fatalf("case %d: failed AppendJSON changed the buffer to %q", i, got)
			}
			continue
		}
		if !bytes.HasPrefix(got, prefix) || !bytes.Equal(got[len(prefix):], want) {
			t.Fatalf("case %d:\n got %s\nwant %s", i, got[len(prefix):], want)
		}
	}
}

// TestAppendJSONFields decodes AppendJSON's output back and compares it
// field by field with the response, on a response with every field set.
func TestAppendJSONFields(t *testing.T) {
	resp := &Response{
		Query: "q <a> & \"b\"", Repo: "r", Commit: "c", Repos: []string{"r", "s"}, Trigger: "t", Confidence: 0.25,
		Symbols: []string{"F"}, Arms: []string{"bm25", "graph"}, Budget: 8000, Tokens: 7999,
		Chunks: []Chunk{{Repo: "r", Commit: "c", Path: "a.go", StartLine: 1, EndLine: 9, Symbol: "F", Kind: "function",
			Granularity: "full", Tokens: 12, Score: 1.5e-9, Signals: []string{"bm25"}, Provenance: "r@c:a.go#L1-9", Text: "func F() {}\n\t// \u2028 \xff"}},
		Files:   []File{{Repo: "r", Path: "a.go", Score: 3, Signals: []string{"bm25"}}, {Path: "b.go", Signals: nil}},
		Commits: []Commit{{Repo: "r", Hash: "abc", When: "2026-12-05T10:00:00Z", Author: "A <b>", Subject: "fix <x>", Files: []string{"a.go"}, Others: 2}},
		Dropped: 3, Timings: map[string]int{"total": 5, "pack": 2, "bm25": 1}, Context: "ctx",
		AlreadySent: []string{"x"}, TokensSaved: 40, Stale: true, StaleReason: "down",
	}
	b, err := resp.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got Response
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	want := *resp
	want.Chunks[0].Text = "func F() {}\n\t// \u2028 \ufffd" // invalid UTF-8 is sent as U+FFFD
	if !reflect.DeepEqual(&got, &want) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, want)
	}
}

func BenchmarkAppendJSON(b *testing.B) {
	r := rand.New(rand.NewSource(1))
	resp := randResponse(r)
	text := strings.Repeat("func (s *state) walk(n ir.Node) {\n\tif n == nil && x < y {\n\t\treturn \"x\"\n\t}\n}\n", 400)
	resp.Context = text
	resp.Chunks = []Chunk{{Text: text}}
	b.Run("encoding/json", func(b *testing.B) {
		var buf bytes.Buffer
		for range b.N {
			buf.Reset()
			json.NewEncoder(&buf).Encode(resp)
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		var buf []byte
		for range b.N {
			buf, _ = resp.AppendJSON(buf[:0])
		}
	})
}
