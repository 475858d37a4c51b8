package tokenize

import (
	"reflect"
	"strings"
	"testing"
)

func TestTokens(t *testing.T) {
	long := strings.Repeat("ab", 40) // 80 letters: too long whole and as a part
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"   \t\n", nil},
		{"!!! ... ///", nil},
		{"hello", []string{"hello"}},
		{"Hello World", []string{"hello", "world"}},
		{"load_config", []string{"load_config", "load", "config"}},
		{"ConfigLoader", []string{"configloader", "config", "loader"}},
		{"loadConfig", []string{"loadconfig", "load", "config"}},
		{"parseHTTPRequest2", []string{"parsehttprequest2", "parse", "http", "request", "2"}},
		{"HTTPServer", []string{"httpserver", "http", "server"}},
		{"IOError", []string{"ioerror", "io", "error"}},
		{"HTTPSConnection", []string{"httpsconnection", "http", "connection"}}, // plural stemming: https -> http
		{"getURLsFromHTML", []string{"geturlsfromhtml", "get", "url", "from", "html"}},
		{"URLs", []string{"url"}},
		{"MAX_BUFFER_SIZE", []string{"max_buffer_size", "max", "buffer", "size"}},
		{"__init__", []string{"init"}},
		{"_private_thing", []string{"private_thing", "private", "thing"}},
		{"load-config", []string{"load", "config"}},
		{"src/requests/utils.py", []string{"src", "request", "util", "py"}},
		{"pkg.Foo", []string{"pkg", "foo"}},
		{"(*Router).Mount", []string{"router", "mount"}},
		{"utf8", []string{"utf8", "utf", "8"}},
		{"int64", []string{"int64", "int", "64"}},
		{"sha256Sum", []string{"sha256sum", "sha", "256", "sum"}},
		{"v2", []string{"v2", "2"}},
		{"3.14 42", []string{"3", "14", "42"}},
		{"x = y + z", nil},
		{"i, j := 0, 1", []string{"0", "1"}},
		{"the parser of the file", []string{"parser", "file"}},
		{"isEmpty", []string{"isempty", "empty"}},
		{"notFound", []string{"notfound", "not", "found"}},
		{"headers entries classes boxes status class analysis", []string{"header", "entry", "class", "box", "status", "class", "analysis"}},
		{"string embed seed", []string{"string", "embed", "seed"}},
		{"readFiles", []string{"readfile", "read", "file"}},
		{"café naïveParser", []string{"café", "naïveparser", "naïve", "parser"}},
		{"ÜberTool", []string{"übertool", "über", "tool"}},
		{"Straße", []string{"straße"}},
		{"日本語 テスト", []string{"日本語", "テスト"}},
		{"数据Parser", []string{"数据parser", "数据", "parser"}},
		{"Привет мир", []string{"привет", "мир"}},
		{"a b c 7", []string{"7"}},
		{"foo\x00bar", []string{"foo", "bar"}},
		{"bad\xffutf8", []string{"bad", "utf8", "utf", "8"}},
		{"dup dup dup", []string{"dup", "dup", "dup"}},
		{long, nil},
		{"thisIs" + long + "Name", []string{"name"}},
		{"func (s *Server) ServeHTTP(w ResponseWriter, r *Request)", []string{"func", "server", "servehttp", "serve", "http", "responsewriter", "response", "writer", "request"}},
	}
	for _, tt := range tests {
		got := Tokens(tt.in)
		if len(got) == 0 && len(tt.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Tokens(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTokensVeryLongIdentifier(t *testing.T) {
	// 200 camel-case parts: the whole word is too long and dropped, the parts stay.
	var b strings.Builder
	for i := 0; i < 200; i++ {
		b.WriteString("Part")
	}
	got := Tokens(b.String())
	if len(got) != 200 {
		t.Fatalf("len = %d, want 200", len(got))
	}
	for _, w := range got {
		if w != "part" {
			t.Fatalf("token %q, want part", w)
		}
	}
}

func TestQueryTokens(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"load config", []string{"load", "config"}},
		{"load_config", []string{"load_config", "load", "config"}},
		{"how does the server parse the http request", []string{"server", "parse", "http", "request"}},
		{"where is the function that reads files", []string{"read", "file"}},
		{"read file readFile", []string{"read", "file", "readfile"}},
		{"find", []string{"find"}},
		{"the of a", nil},
		{"json unmarshal struct", []string{"json", "unmarshal", "struct"}},
	}
	for _, tt := range tests {
		got := QueryTokens(tt.in)
		if len(got) == 0 && len(tt.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("QueryTokens(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"parseHTTPRequest2", []string{"parse", "http", "request", "2"}},
		{"HTTPServer", []string{"http", "server"}},
		{"load_config", []string{"load", "config"}},
		{"aValue", []string{"a", "value"}},
		{"URLs", []string{"urls"}},
		{"IDsForUsers", []string{"ids", "for", "users"}},
		{"foo.bar-baz/qux", []string{"foo", "bar", "baz", "qux"}},
		{"utf8Decode", []string{"utf", "8", "decode"}},
		{"ÉcoleNormale", []string{"école", "normale"}},
		{"___", nil},
	}
	for _, tt := range tests {
		got := Split(tt.in)
		if len(got) == 0 && len(tt.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Split(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestIsStopword(t *testing.T) {
	tests := []struct {
		w    string
		want bool
	}{
		{"the", true}, {"of", true}, {"how", true}, {"function", true},
		{"does", true}, {"not", false}, {"get", false}, {"config", false}, {"", false},
	}
	for _, tt := range tests {
		if got := IsStopword(tt.w); got != tt.want {
			t.Errorf("IsStopword(%q) = %v, want %v", tt.w, got, tt.want)
		}
	}
}

// TestIndexQueryAgree checks that stemming and filtering are the same on
// both sides: every query term of a text is also one of its index terms.
func TestIndexQueryAgree(t *testing.T) {
	texts := []string{
		"ReadFiles from the Headers of HTTPRequests",
		"load_configs ConfigLoaders entries",
		"getURLsFromHTML utf8 café",
	}
	for _, s := range texts {
		idx := map[string]bool{}
		for _, w := range Tokens(s) {
			idx[w] = true
		}
		for _, w := range QueryTokens(s) {
			if !idx[w] {
				t.Errorf("%q: query term %q not among index terms %q", s, w, Tokens(s))
			}
		}
	}
}

func BenchmarkTokens(b *testing.B) {
	src := strings.Repeat("func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {\n\t// parse the request header\n\tbuf := make([]byte, maxBufferSize)\n}\n", 200)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		Tokens(src)
	}
}

func TestMaxStopLen(t *testing.T) {
	for w := range englishStop {
		if len(w) > maxStopLen {
			t.Errorf("stopword %q longer than maxStopLen %d", w, maxStopLen)
		}
	}
}
