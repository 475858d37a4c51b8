// Package codectx holds the domain types shared by every part of the engine:
// the files of a repository snapshot, the chunks they are cut into, and the
// reasons a file can be skipped. It depends on nothing but the standard
// library, so any adapter (git, tree-sitter, blob store, queue) can speak it
// without knowing the others.
package codectx

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"unicode/utf8"
)

// Language names a source language. The empty Language means unknown.
type Language string

const (
	Go         Language = "go"
	Python     Language = "python"
	TypeScript Language = "typescript"
	TSX        Language = "tsx"
	JavaScript Language = "javascript"
	Java       Language = "java"
	Rust       Language = "rust"
	Markdown   Language = "markdown"
	Text       Language = "text" // any other text file: config, YAML, docs
)

// Languages are the languages a chunk may have, in the order docs list them.
var Languages = []Language{Go, Python, TypeScript, TSX, JavaScript, Java, Rust, Markdown, Text}

// LanguageNames are the names of Languages, for flags, errors and docs.
func LanguageNames() []string {
	names := make([]string, len(Languages))
	for i, l := range Languages {
		names[i] = string(l)
	}
	return names
}

// Kind is what a chunk covers.
type Kind string

const (
	KindModule    Kind = "module"    // file header: package clause, imports, module docstring
	KindFunction  Kind = "function"  // free function
	KindMethod    Kind = "method"    // function bound to a type
	KindClass     Kind = "class"     // class (Python, TS/JS, Java)
	KindStruct    Kind = "struct"    // struct (Go, Rust)
	KindInterface Kind = "interface" // interface, trait
	KindType      Kind = "type"      // other type declaration: alias, enum, impl block
	KindWindow    Kind = "window"    // line window of a file with no symbol parser
)

// Chunk is one retrievable unit of a file: a symbol, a module header or a
// line window. Lines are 1-based and inclusive; bytes are 0-based, end
// exclusive.
type Chunk struct {
	Path      string   `json:"path"`
	Language  Language `json:"language"`
	Kind      Kind     `json:"kind"`
	Name      string   `json:"name,omitempty"`      // qualified: Flask.add_url_rule, (*Router).Mount
	Signature string   `json:"signature,omitempty"` // declaration line(s) without the body
	Doc       string   `json:"doc,omitempty"`       // doc comment or docstring, comment markers stripped
	StartLine int      `json:"start_line"`
	EndLine   int      `json:"end_line"`
	StartByte int      `json:"start_byte"`
	EndByte   int      `json:"end_byte"`
	Body      string   `json:"body"`              // the source text of [StartByte, EndByte), doc comment included when adjacent
	Calls     []string `json:"calls,omitempty"`   // names called: "foo", "pkg.Foo", "self.bar", "obj.Method"
	Imports   []string `json:"imports,omitempty"` // modules imported (module chunks; raw spelling as written)
	Types     []string `json:"types,omitempty"`   // type names referenced in signature and body
	Hash      string   `json:"hash"`              // content hash of Body (see HashText)
}

// Outlined reports whether Body outlines the chunk's span rather than
// holding all of it: a container (class, interface, impl) whose members
// are cut to their declarations (pkg/chunk).
func (c *Chunk) Outlined() bool { return c.EndByte-c.StartByte != len(c.Body) }

// HashText is the content hash used for chunks and for the embedding cache.
func HashText(s string) string {
	h := sha1.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// Skip reasons: why a file was not chunked by symbols. A file skipped for
// one of these gets no chunks; a degraded file still gets line windows.
const (
	SkipBinary     = "binary"
	SkipTooLarge   = "too_large"
	SkipMinified   = "minified"
	SkipGenerated  = "generated"
	SkipSymlink    = "symlink"
	SkipSubmodule  = "submodule"
	SkipLFSPointer = "lfs_pointer"
	SkipEmpty      = "empty"
	SkipIgnored    = "gitignored"

	DegradedInvalidUTF8  = "invalid_utf8"  // parsed after replacing bad bytes
	DegradedParseTimeout = "parse_timeout" // parser too slow: line windows instead
	DegradedParseError   = "parse_error"   // parser failed or panicked: line windows instead
	DegradedUnknownLang  = "unknown_language"
)

// Clip returns s cut to at most n bytes at the start of a character, so
// that a bound on what is echoed, embedded or sent never splits one.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Quote quotes a value a client sent, for an error or a log line: at most
// its first n bytes (Clip), and its length when cut, so that what an
// answer echoes does not grow with what was sent.
func Quote(s string, n int) string {
	if len(s) <= n {
		return strconv.Quote(s)
	}
	return strconv.Quote(Clip(s, n)) + "... (" + strconv.Itoa(len(s)) + " bytes)"
}
