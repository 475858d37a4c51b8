package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestBenchParse: every row parses the files it names, the Go rows count
// only the Go files tree-sitter parses, and the index row counts every file
// the index would chunk (a README has no grammar).
func TestBenchParse(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"a/a.go":    "package a\n\n// F is f.\nfunc F() int { return 1 }\n",
		"a/b.go":    "package a\n\ntype T struct{ X int }\n\nfunc (t T) M() {}\n",
		"p/m.py":    "def f(x):\n    return x + 1\n",
		"README.md": "# a\n\ntext\n",
		"big.go":    "package a\n\nvar B = `" + strings.Repeat("x", 2000) + "`\n",
	}
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runCLI(t, "bench-parse", "--json", "--rounds", "2", "--max-file-size", "1000", dir)
	if err != nil {
		t.Fatal(err)
	}
	var rows []ParseRate
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	size := func(ps ...string) int64 {
		n := 0
		for _, p := range ps {
			n += len(files[p])
		}
		return int64(2 * n)
	}
	want := []struct {
		files int
		bytes int64
	}{
		{3, size("a/a.go", "a/b.go", "p/m.py")},
		{3, size("a/a.go", "a/b.go", "p/m.py")},
		{4, size("a/a.go", "a/b.go", "p/m.py", "README.md")},
		{2, size("a/a.go", "a/b.go")},
		{2, size("a/a.go", "a/b.go")},
		{2, size("a/a.go", "a/b.go")},
		{2, size("a/a.go", "a/b.go")},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(want), out)
	}
	for i, w := range want {
		if rows[i].Files != w.files || rows[i].Bytes != w.bytes || rows[i].CPUSeconds < 0 {
			t.Errorf("row %q: %d files, %d bytes; want %d, %d", rows[i].Name, rows[i].Files, rows[i].Bytes, w.files, w.bytes)
		}
	}

	// -compare-go chunks every Go file on both Go paths: big.go is over
	// the size cap, so not read; a syntax error goes to tree-sitter.
	if err := os.WriteFile(filepath.Join(dir, "a/bad.go"), []byte("package a\n\nfunc F( {\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, "bench-parse", "--json", "--compare-go", "--max-file-size", "1000", dir)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Rows    []ParseRate `json:"rows"`
		Compare goCompare   `json:"compare_go"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if c := got.Compare; c.Files != 3 || len(c.Differ) != 0 || c.Fallbacks["syntax"] != 1 || len(got.Rows) != len(want) {
		t.Errorf("compare-go: %+v, %d rows", c, len(got.Rows))
	}
}

// TestIndexMemoryLimit: codectx index runs under its soft memory limit
// (--memory-limit, default 160 MiB), none with 0, and GOMEMLIMIT wins.
func TestIndexMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.go"), []byte("package a\n\nfunc F() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOMEMLIMIT", "")
	for _, tc := range []struct {
		args []string
		want int64
	}{
		{nil, defaultIndexMemoryLimit},
		{[]string{"--memory-limit", "123456789"}, 123456789},
		{[]string{"--memory-limit", "0"}, math.MaxInt64},
	} {
		debug.SetMemoryLimit(math.MaxInt64)
		args := append(append([]string{"index", "--data", t.TempDir()}, tc.args...), dir)
		if _, err := runCLI(t, args...); err != nil {
			t.Fatal(err)
		}
		if got := debug.SetMemoryLimit(-1); got != tc.want {
			t.Errorf("%v: limit %d, want %d", tc.args, got, tc.want)
		}
	}
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(math.MaxInt64)
	if _, err := runCLI(t, "index", "--data", t.TempDir(), dir); err != nil {
		t.Fatal(err)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("with GOMEMLIMIT set: limit %d", got)
	}
}
