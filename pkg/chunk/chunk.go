// Package chunk cuts one source file into retrievable chunks: one chunk per
// function, method and type, found with tree-sitter, plus one module-header
// chunk per code file; text files get line windows or Markdown sections.
// It also screens out files that should not be indexed (binary, too large,
// minified, generated, empty) and degrades gracefully when parsing fails.
//
// Chunking rules:
//
//   - Code files (Go, Python, TypeScript, TSX, JavaScript, Java, Rust) get
//     one KindModule chunk first, spanning the file header: the package
//     clause or module docstring and the leading run of imports (its doc
//     comment included). When a file has no header its module chunk is empty
//     (Body "", lines 1-1) but still carries Name and Imports.
//   - Every function, method, class, struct, interface, trait, enum, type
//     alias and impl block gets a chunk. A chunk starts at its adjacent doc
//     comment, decorators or attributes and its Body is the exact source
//     slice [StartByte, EndByte).
//   - Exception: a container with member chunks (class, interface, enum,
//     Rust impl and trait) gets an outline Body: its source with each member
//     chunk replaced by the member's declaration up to its body followed by
//     " ..." (Python) or " { ... }" (brace languages); member doc comments
//     are dropped from the outline. StartLine/EndLine and bytes still span
//     the whole container; Hash is the hash of the outline.
//   - Functions nested in functions get no chunk of their own.
//   - Top-level code outside every chunk (Go var/const blocks, Python
//     statements, loose ERROR regions) becomes KindWindow chunks named
//     "path#L<line>"; stretches holding only comments and blank lines are
//     dropped.
//   - Text files get KindWindow chunks of Options.WindowLines lines with no
//     overlap, named "path#L<line>"; blank windows are dropped. Markdown gets
//     one chunk per ATX heading section (Name = heading text, Signature =
//     heading path "A > B"), long sections split into windows.
//
// Go files are chunked with go/parser instead of tree-sitter unless
// Options.GoParser says GoTreeSitter (goast.go): the chunks are the same,
// field for field, and a file go/parser rejects or that holds a construct
// whose tree-sitter parse the go/parser path does not model goes to
// tree-sitter.
//
// When content is not valid UTF-8 it is repaired first, and all byte offsets
// refer to the repaired text. Parse never panics: parser failures give line
// windows with a Degraded reason.
package chunk

import (
	"bytes"
	"context"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"codectx/pkg/codectx"
)

// Version identifies the chunking output; bump it when output changes so
// parse caches keyed on it are invalidated.
const Version = "1"

// Options tune Parse. The zero value gives the defaults.
type Options struct {
	MaxFileSize  int64         // default 1 MiB (1<<20) when 0
	ParseTimeout time.Duration // per-file CPU budget of the parse and every pass after it, default 2s when 0 (budget.go)
	WindowLines  int           // line-window size for non-code files, default 40 when 0; windows do not overlap
	GoParser     GoParser      // how Go files are chunked (GoDefault, GoAST, GoTreeSitter); the chunks are the same either way
}

func (o Options) withDefaults() Options {
	if o.MaxFileSize <= 0 {
		o.MaxFileSize = 1 << 20
	}
	if o.ParseTimeout <= 0 {
		o.ParseTimeout = 2 * time.Second
	}
	if o.WindowLines <= 0 {
		o.WindowLines = 40
	}
	return o
}

// Result is the outcome of chunking one file.
type Result struct {
	Language codectx.Language
	Package  string   // Go package name, Java package, Rust crate-relative module ("crate::de"); "" otherwise
	Imports  []string // file-level imported modules, raw spelling as written
	Chunks   []codectx.Chunk
	Skip     string // one of codectx.Skip* when the file gets no chunks at all
	Degraded string // one of codectx.Degraded* when the file got line windows instead of symbols or was repaired
}

var extLang = map[string]codectx.Language{
	".go":       codectx.Go,
	".py":       codectx.Python,
	".pyi":      codectx.Python,
	".ts":       codectx.TypeScript,
	".mts":      codectx.TypeScript,
	".cts":      codectx.TypeScript,
	".tsx":      codectx.TSX,
	".js":       codectx.JavaScript,
	".mjs":      codectx.JavaScript,
	".cjs":      codectx.JavaScript,
	".jsx":      codectx.JavaScript,
	".java":     codectx.Java,
	".rs":       codectx.Rust,
	".md":       codectx.Markdown,
	".markdown": codectx.Markdown,
}

// Detect returns the language of a file from its extension (".d.ts" is
// TypeScript). An extensionless file with a python or node shebang is
// Python or JavaScript; every other file is codectx.Text.
func Detect(p string, content []byte) codectx.Language {
	ext := strings.ToLower(path.Ext(p))
	if l, ok := extLang[ext]; ok {
		return l
	}
	if ext == "" && bytes.HasPrefix(content, []byte("#!")) {
		line := content
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
		}
		switch {
		case bytes.Contains(line, []byte("python")):
			return codectx.Python
		case bytes.Contains(line, []byte("node")):
			return codectx.JavaScript
		}
	}
	return codectx.Text
}

// Parse chunks one file. It never panics; see the package documentation for
// the rules. A code file whose chunking, parse and passes after it, takes
// more than Options.ParseTimeout of CPU gets line windows with
// Degraded=parse_timeout (see budget). So does a done ctx, so callers
// should check ctx.Err() before caching.
func Parse(ctx context.Context, p string, content []byte, opt Options) Result {
	opt = opt.withDefaults()
	res := Result{Language: Detect(p, content)}
	if reason := screen(p, content, opt); reason != "" {
		res.Skip = reason
		return res
	}
	if !utf8.Valid(content) {
		content = []byte(strings.ToValidUTF8(string(content), "\uFFFD"))
		res.Degraded = codectx.DegradedInvalidUTF8
	}
	src := string(content)
	spec := specFor(res.Language)
	if spec == nil {
		if res.Language == codectx.Markdown {
			res.Chunks = markdownChunks(p, src, opt.WindowLines)
		} else {
			res.Chunks = newLines(src).windows(p, res.Language, 0, len(src), opt.WindowLines)
		}
		return res
	}
	var parsed parsed
	degraded, fallback := "", "tree-sitter"
	b := startBudget(ctx, opt.ParseTimeout)
	defer b.stop()
	if res.Language == codectx.Go && opt.goAST() {
		parsed, degraded, fallback = parseGoAST(ctx, p, src, opt, b)
	}
	if fallback != "" {
		parsed, degraded = parseCode(ctx, spec, p, src, opt, b)
	}
	if degraded != "" {
		res.Degraded = degraded
		res.Chunks = newLines(src).windows(p, res.Language, 0, len(src), opt.WindowLines)
		return res
	}
	res.Package = parsed.pkg
	res.Imports = parsed.imports
	res.Chunks = parsed.chunks
	return res
}

// screen returns the Skip reason for content, or "".
func screen(p string, content []byte, opt Options) string {
	switch {
	case int64(len(content)) > opt.MaxFileSize:
		return codectx.SkipTooLarge
	case len(bytes.TrimSpace(content)) == 0:
		return codectx.SkipEmpty
	case isBinary(content):
		return codectx.SkipBinary
	case isGeneratedPath(p) || hasGeneratedHeader(content):
		return codectx.SkipGenerated
	case isMinified(p, content):
		return codectx.SkipMinified
	}
	return ""
}

// isBinary reports a NUL byte in the first 8 KiB, or more than 30% of that
// prefix being control characters or bytes that are not UTF-8.
func isBinary(b []byte) bool {
	if len(b) > 8<<10 {
		b = b[:8<<10]
	}
	if bytes.IndexByte(b, 0) >= 0 {
		return true
	}
	bad := 0
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			if c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v' && c != 0x1b && c != '\b' {
				bad++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 && len(b)-i >= utf8.UTFMax {
			bad++
		}
		i += size
	}
	return bad*10 > len(b)*3
}

var generatedSuffixes = []string{
	".pb.go", ".pb.gw.go", "_pb2.py", "_pb2_grpc.py", "_pb2.pyi",
	".min.js", ".min.mjs", ".min.css",
}

var lockFiles = map[string]bool{
	"package-lock.json": true, "yarn.lock": true, "pnpm-lock.yaml": true,
	"Cargo.lock": true, "go.sum": true, "poetry.lock": true,
}

// isGeneratedPath matches protobuf outputs, minified bundles and lock files.
func isGeneratedPath(p string) bool {
	base := path.Base(p)
	if lockFiles[base] {
		return true
	}
	lower := strings.ToLower(base)
	for _, s := range generatedSuffixes {
		if strings.HasSuffix(lower, s) {
			return true
		}
	}
	return false
}

var generatedRe = regexp.MustCompile(`(?m)^\s*(?://|#|/?\*+|--|;+|<!--)?\s*Code generated\b.*DO NOT EDIT`)

// hasGeneratedHeader looks for the Go "Code generated ... DO NOT EDIT."
// marker (in any comment syntax) or "@generated" in the first 4 KiB.
func hasGeneratedHeader(b []byte) bool {
	if len(b) > 4<<10 {
		b = b[:4<<10]
	}
	return bytes.Contains(b, []byte("@generated")) ||
		bytes.Contains(b, []byte("DO NOT EDIT")) && generatedRe.Match(b)
}

var minifiable = map[string]bool{
	".js": true, ".mjs": true, ".cjs": true, ".jsx": true, ".ts": true, ".mts": true,
	".cts": true, ".tsx": true, ".css": true, ".json": true, ".map": true,
}

// isMinified applies to JS/TS/CSS/JSON: some line longer than 5000 bytes,
// or (for files of at least 2 KiB) an average line longer than 300 bytes.
func isMinified(p string, b []byte) bool {
	if !minifiable[strings.ToLower(path.Ext(p))] {
		return false
	}
	lines, longest, cur := 1, 0, 0
	for _, c := range b {
		if c == '\n' {
			lines++
			longest = max(longest, cur)
			cur = 0
			continue
		}
		cur++
	}
	longest = max(longest, cur)
	if longest > 5000 {
		return true
	}
	return len(b) >= 2<<10 && len(b)/lines > 300
}

// ParseOnly runs what Parse runs up to the syntax tree and nothing after
// it: the screen and tree-sitter's parse, no query and no chunk. It reports
// whether tree-sitter parsed the file (false: skipped, a language without a
// grammar, or a failed parse). It is the ceiling of Parse's speed that
// `codectx bench-parse` measures beside Parse.
func ParseOnly(p string, content []byte, opt Options) bool {
	opt = opt.withDefaults()
	sp := specFor(Detect(p, content))
	if sp == nil || screen(p, content, opt) != "" || !utf8.Valid(content) {
		return false
	}
	w := sp.get()
	w.p.SetOperationLimit(int(max(opt.ParseTimeout.Microseconds(), 1)))
	tree, err := w.p.ParseCtx(context.Background(), nil, content)
	if err != nil {
		w.p.Reset()
		sp.pool.Put(w)
		return false
	}
	tree.Close()
	sp.pool.Put(w)
	return true
}
