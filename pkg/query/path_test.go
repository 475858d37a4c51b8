package query

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/fusion"
	"codectx/pkg/index"
	"codectx/pkg/segment"
	"codectx/pkg/testrepo"
)

func buildSeg(t *testing.T, files map[string]string) *segment.Segment {
	t.Helper()
	r := testrepo.New(t)
	r.Commit("initial", files)
	store := blob.NewMem()
	if _, err := index.Build(context.Background(), store, r.Dir, index.Options{Name: "r"}); err != nil {
		t.Fatal(err)
	}
	seg, err := index.LoadHead(context.Background(), store, index.DefaultTenant, "r")
	if err != nil {
		t.Fatal(err)
	}
	return seg
}

func paths(seg *segment.Segment, ids []int) []string {
	var out []string
	for _, id := range ids {
		out = append(out, seg.Chunks[id].Path)
	}
	return out
}

func TestFileStem(t *testing.T) {
	tests := []struct{ path, want string }{
		{"src/error.rs", "error"},
		{"src/utils/proxy.ts", "proxy"},
		{"src/utils/index.ts", "utils"},
		{"requests/__init__.py", "requests"},
		{"src/value/mod.rs", "value"},
		{"test/app.test.ts", "app"},
		{"index.ts", ""},
		{"Makefile", "Makefile"},
	}
	for _, tt := range tests {
		if got := fileStem(tt.path); got != tt.want {
			t.Errorf("fileStem(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

func TestNameTerms(t *testing.T) {
	tests := []struct {
		q    string
		want string
	}{
		{"Fix request log output", "request log output"},
		{"fix(proxy): respect incoming headers", "proxy respect incoming header"},
		{"Adds fix_position to the lexer", "fix_position fix position lexer"},
		{"fix", "fix"}, // nothing left: keep all
	}
	for _, tt := range tests {
		if got := strings.Join(nameTerms(tt.q), " "); got != tt.want {
			t.Errorf("nameTerms(%q) = %q, want %q", tt.q, got, tt.want)
		}
	}
}

func TestPathArm(t *testing.T) {
	seg := buildSeg(t, map[string]string{
		// event.ts says "proxy" far more often than proxy.ts does.
		"src/event.ts":       "export function proxyEvent(proxy: Proxy) { return proxy.proxy(proxy) }\n",
		"src/proxy.ts":       "export function sendTo(target: string) { return fetch(target) }\n",
		"src/proxy_utils.ts": "export function rewrite(url: string) { return url }\n",
		"src/fix.ts":         "export const x = 1\n",
	})
	e := &Engine{Seg: seg}
	got := paths(seg, e.pathArm("fix(proxy): respect the incoming method", "proxy", nil, 50, nil))
	want := []string{"src/proxy.ts", "src/proxy_utils.ts"}
	if !slices.Equal(got, want) {
		t.Errorf("pathArm = %v, want %v (fix.ts is a change verb, not a name)", got, want)
	}
	if got := e.pathArm("unrelated words", "", nil, 50, nil); len(got) != 0 {
		t.Errorf("pathArm(unrelated) = %v, want none", paths(seg, got))
	}
	rk, err := e.Search(context.Background(), Request{Query: "fix(proxy): respect the incoming method", Route: true})
	if err != nil {
		t.Fatal(err)
	}
	if rk.Files[0].Path != "src/proxy.ts" {
		t.Errorf("top file = %s, want src/proxy.ts (files %+v)", rk.Files[0].Path, rk.Files)
	}
}

func TestIsAdditive(t *testing.T) {
	tests := []struct {
		q    string
		want bool
	}{
		{"feat: add utilities for server sent events", true},
		{"feat(cors): cors handlers", true},
		{"Add CORS support", true},
		{"Support deserializing map keys", true},
		{"introduces a retry policy", true},
		{"fix: don't lowercase routes", false},
		{"Remove deprecated classes", false},
		{"types(setResponseHeaders): add autocompletion", true},
		{"", false},
	}
	for _, tt := range tests {
		if got := isAdditive(tt.q); got != tt.want {
			t.Errorf("isAdditive(%q) = %v, want %v", tt.q, got, tt.want)
		}
	}
}

func TestIndexArm(t *testing.T) {
	seg := buildSeg(t, map[string]string{
		"src/utils/index.ts":   "export * from \"./cookie\";\nexport * from \"./session\";\n",
		"src/utils/cookie.ts":  "export function setCookie(name: string, value: string) { return name + value }\n",
		"src/utils/session.ts": "export function useSession(cookie: string) { return cookie }\n",
		"src/app.ts":           "import { setCookie } from \"./utils/cookie\";\nexport function app() { return setCookie(\"a\", \"b\") }\n",
	})
	e := &Engine{Seg: seg}
	var seeds []fusion.Scored
	for _, p := range []string{"src/utils/cookie.ts", "src/utils/session.ts", "src/app.ts"} {
		f, _ := seg.File(p)
		seeds = append(seeds, fusion.Scored{ID: strconv.Itoa(f.Chunks[len(f.Chunks)-1])})
	}
	got := paths(seg, e.indexArm("feat: add signed cookie utils", seeds, nil))
	if len(got) != 1 || got[0] != "src/utils/index.ts" {
		t.Errorf("indexArm(additive) = %v, want [src/utils/index.ts]", got)
	}
	if got := e.indexArm("fix: cookie parsing", seeds, nil); len(got) != 0 {
		t.Errorf("indexArm(fix) = %v, want none", paths(seg, got))
	}
	// One re-exported seed is not a registration point.
	if got := e.indexArm("feat: add x", seeds[:1], nil); len(got) != 0 {
		t.Errorf("indexArm(one seed) = %v, want none", paths(seg, got))
	}
}

type vocab map[string]bool

func (v vocab) DocFreq(t string) int {
	if v[t] {
		return 1
	}
	return 0
}

func TestCompoundTerms(t *testing.T) {
	ix := vocab{"mapkey": true, "map_key": true, "serversentevent": true, "rawvalue": true, "keyvalue": true}
	tests := []struct {
		q    string
		want []string
	}{
		{"Support deserializing map key as RawValue", []string{"mapkey", "map_key"}},
		{"feat: add utilities for server sent events", []string{"serversentevent"}},
		{"map, key", nil},    // punctuation ends a run
		{"map the key", nil}, // a stopword ends a run
		{"raw value", []string{"rawvalue"}},
		{"MapKey value", nil}, // identifiers are not prose words
		{"nothing joins here", nil},
	}
	for _, tt := range tests {
		got := compoundTerms(tt.q, ix, nil)
		if len(got) != len(tt.want) {
			t.Errorf("compoundTerms(%q) = %v, want %v", tt.q, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("compoundTerms(%q) = %v, want %v", tt.q, got, tt.want)
			}
		}
	}
	if got := compoundTerms("raw value", ix, []string{"rawvalue"}); len(got) != 0 {
		t.Errorf("compoundTerms kept a term the query has: %v", got)
	}
}

// The files a name is matched against, and the words matched.
func TestPathArmNames(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		q     string
		want  string // the only file listed
	}{
		{
			name: "a Java file's name is its class's",
			files: map[string]string{
				"src/main/java/org/x/Selector.java": "package org.x;\npublic class Selector { void select() {} }\n",
				"src/selector.ts":                   "export function select() {}\n",
			},
			q: "consecutive combinators in CSS selectors", want: "src/selector.ts",
		},
		{
			name: "only the title's words",
			files: map[string]string{
				"source/core/request.ts": "export function build() {}\n",
				"source/types/retry.ts":  "export type Retry = number\n",
			},
			q: "Improve robustness of request construction\n\n* Fix flaky retry tests", want: "source/core/request.ts",
		},
		{
			name: "tests are named after what they test",
			files: map[string]string{
				"source/hooks.ts":     "export type Hooks = {}\n",
				"test/hooks.ts":       "import test from 'ava'\n",
				"tests/test_hooks.py": "def test_x():\n    pass\n",
			},
			q: "Fix response body cleanup after hooks", want: "source/hooks.ts",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seg := buildSeg(t, tt.files)
			e := &Engine{Seg: seg}
			if got := paths(seg, e.pathArm(tt.q, "", nil, 50, nil)); len(got) != 1 || got[0] != tt.want {
				t.Errorf("pathArm = %v, want only %s", got, tt.want)
			}
		})
	}
}

func TestAbbreviatedFileNames(t *testing.T) {
	seg := buildSeg(t, map[string]string{
		// de.rs spells its name out in its symbols; ser.rs does not use
		// "de..." words, and dep.rs has too few of them.
		"src/de.rs":  "pub struct Deserializer {}\nimpl Deserializer {\n    pub fn deserialize_any() {}\n    pub fn deserialize_map() {}\n}\npub fn from_str() {}\n",
		"src/ser.rs": "pub struct Serializer {}\nimpl Serializer {\n    pub fn serialize_map() {}\n    pub fn serialize_seq() {}\n}\n",
		"src/dep.rs": "pub fn dependency() {}\npub fn other() {}\n",
		"src/lib.rs": "pub mod de;\npub mod ser;\npub mod dep;\n",
	})
	e := &Engine{Seg: seg}
	tests := []struct {
		q    string
		want []string
	}{
		{"tweak f64 deserialization for round trips", []string{"src/de.rs"}},
		{"faster serializing of maps", []string{"src/ser.rs"}},
		{"dependency resolution", nil}, // one symbol is not enough
		{"deprecate the old API", nil}, // agrees with no expansion
		{"describe the deserializer", []string{"src/de.rs"}},
	}
	for _, tt := range tests {
		got := paths(seg, e.pathArm(tt.q, "", nil, 50, nil))
		if !slices.Equal(got, tt.want) {
			t.Errorf("pathArm(%q) = %v, want %v", tt.q, got, tt.want)
		}
	}
	var pairs []string
	for _, a := range fileNames(seg).abbrs {
		pairs = append(pairs, seg.Files[a.file].Path+":"+a.short+"="+a.long)
	}
	slices.Sort(pairs)
	if want := []string{"src/de.rs:de=deserializer", "src/ser.rs:ser=serializer"}; !slices.Equal(pairs, want) {
		t.Errorf("abbreviations = %v, want %v", pairs, want)
	}
}

// dfs is a vocabulary with document frequencies.
type dfs map[string]int

func (v dfs) DocFreq(t string) int { return v[t] }

func (v dfs) Prefixed(p string, f func(string, int) bool) {
	for _, t := range slices.Sorted(maps.Keys(v)) {
		if strings.HasPrefix(t, p) && !f(t, v[t]) {
			return
		}
	}
}

func TestRootTerms(t *testing.T) {
	ix := dfs{"deserialize": 40, "deserializer": 90, "deserializing": 2, "validate": 12, "serializationerror": 50, "format": 30, "formatting": 20}
	tests := []struct {
		terms, want []string
	}{
		{[]string{"deserializing", "map"}, []string{"deserializer"}}, // rare form -> the common one
		{[]string{"validation"}, []string{"validate"}},               // unseen -> same root
		{[]string{"formatting"}, nil},                                // common enough as it is
		{[]string{"serialization"}, nil},                             // serializationerror runs on past the root
		{[]string{"deserializer"}, nil},                              // already the common form
		{[]string{"maps", "route"}, nil},                             // too short to conflate
	}
	for _, tt := range tests {
		if got := rootTerms(ix, tt.terms); !slices.Equal(got, tt.want) {
			t.Errorf("rootTerms(%v) = %v, want %v", tt.terms, got, tt.want)
		}
	}
}

func TestAbbrevTerms(t *testing.T) {
	tests := []struct {
		q    string
		want []string
	}{
		{"Format f64 in error messages using ryu", []string{"fmt", "err", "msg"}},
		{"formatting of initialized buffers", []string{"fmt", "init", "buf"}},
		{"bad cfg in ctx", []string{"config", "configuration", "context"}}, // short forms map back
		// Identifiers are the code's own spelling.
		{"Use Map::with_capacity in value::Serializer::serialize_map", nil},
		{"Avoid BufferedInputStream reads", nil},
		{"nothing to expand here", nil},
	}
	for _, tt := range tests {
		if got := abbrevTerms(tt.q, nil); !slices.Equal(got, tt.want) {
			t.Errorf("abbrevTerms(%q) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if got := abbrevTerms("error handling", []string{"err"}); len(got) != 0 {
		t.Errorf("abbrevTerms repeated a term the query has: %v", got)
	}
}

func TestDeclarationOnlyPrior(t *testing.T) {
	seg := buildSeg(t, map[string]string{
		"source/types/hooks.ts": "/** Hooks run after the response body is read and cleaned up. */\nexport type Hooks = {\n  afterResponse: AfterResponseHook[]\n  beforeRetry: BeforeRetryHook[]\n}\nexport interface AfterResponseHook { (response: Response): void }\n",
		"source/core/ky.ts":     "export class Ky {\n  cleanup(response: Response) {\n    // run the hooks after the body\n    return response\n  }\n}\n",
	})
	if got := declOnly(seg); !got["source/types/hooks.ts"] || got["source/core/ky.ts"] || len(got) != 1 {
		t.Fatalf("declOnly = %v, want only source/types/hooks.ts", got)
	}
	e := &Engine{Seg: seg}
	top := func(q string) string {
		rk, err := e.Search(context.Background(), Request{Query: q, Arms: []string{ArmBM25}})
		if err != nil || len(rk.Files) == 0 {
			t.Fatalf("Search(%q) = %v, %v", q, rk, err)
		}
		return rk.Files[0].Path
	}
	if got := top("Fix response body cleanup after hooks"); got != "source/core/ky.ts" {
		t.Errorf("behaviour query: top file %s, want the code, source/core/ky.ts", got)
	}
	if got := top("Improve documentation of the hooks response types"); got != "source/types/hooks.ts" {
		t.Errorf("types query: top file %s, want source/types/hooks.ts", got)
	}
}

func TestLiterals(t *testing.T) {
	tests := []struct {
		q    string
		want []string
	}{
		{"Restore 'Stack backtrace:' above the backtrace", []string{"Stack backtrace:"}},
		{`Fix erroneous use of 'schema' instead of 'scheme'`, []string{"schema", "scheme"}},
		{`only set "Handle the request" once`, []string{"Handle the request"}},
		{"don't split on the user's apostrophes", nil},
		{"“smart quotes” work", []string{"smart quotes"}},
		{"'ab' is too short, 'unclosed", nil},
		{"' padded ' spans are not literals", nil},
	}
	for _, tt := range tests {
		if got := literals(tt.q); !slices.Equal(got, tt.want) {
			t.Errorf("literals(%q) = %q, want %q", tt.q, got, tt.want)
		}
	}
}

func TestLiteralArm(t *testing.T) {
	files := map[string]string{
		"src/fmt.rs":       "fn debug(f: &mut Formatter) {\n    write!(f, \"\\n\\nStack backtrace:\\n{}\", bt)\n}\n",
		"src/backtrace.rs": "// The backtrace, captured above the error.\nfn capture() -> Backtrace { Backtrace::capture() }\n",
	}
	for i := range 40 { // enough chunks that "fn" is common
		files["src/m"+strconv.Itoa(i)+".rs"] = "fn f" + strconv.Itoa(i) + "() {}\n"
	}
	seg := buildSeg(t, files)
	e := &Engine{Seg: seg}
	arm := func(q string) []int {
		ids, err := e.literalArm(t.Context(), q, nil)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	if got := paths(seg, arm("Restore 'Stack backtrace:' above the backtrace")); !slices.Equal(got, []string{"src/fmt.rs"}) {
		t.Errorf("literalArm = %v, want [src/fmt.rs]", got)
	}
	if got := arm("'fn f' everywhere"); len(got) != 0 {
		t.Errorf("a quoted span in most chunks should say nothing, got %v", paths(seg, got))
	}
	if got := arm("no quotes here"); got != nil {
		t.Errorf("literalArm without quotes = %v", got)
	}
}
