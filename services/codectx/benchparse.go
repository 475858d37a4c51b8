package main

import (
	"context"
	"flag"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"reflect"
	"runtime"
	"syscall"
	"time"

	"codectx/pkg/chunk"
	"codectx/pkg/codectx"
	"codectx/pkg/source"
)

// ParseRate is one row of `codectx bench-parse`: a parser over a set of
// the snapshot's files, timed in the CPU of this process.
type ParseRate struct {
	Name       string  `json:"name"`
	Files      int     `json:"files"`
	Bytes      int64   `json:"bytes"`
	CPUSeconds float64 `json:"cpu_seconds"` // user + sys
	Seconds    float64 `json:"seconds"`     // wall
	MBPerCore  float64 `json:"mb_per_cpu_second"`
}

// runBenchParse measures the parse rates that bound indexing on one
// snapshot, in one process and one goroutine: tree-sitter's parse alone
// (the ceiling of this design), chunk.Parse (what indexing runs per file)
// and, on the Go files, tree-sitter against go/parser and chunk.Parse's
// two Go paths against each other.
func runBenchParse(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench-parse", flag.ContinueOnError)
	fs.SetOutput(usageOut("bench-parse", stderr, args))
	maxSize := bytesFlag(fs, "max-file-size", 1<<20, "skip files larger than this many `bytes` (as index does)")
	rounds := fs.Int("rounds", 1, "parse the files this many times per row")
	asJSON := fs.Bool("json", false, "print the rows as JSON")
	compareGo := fs.Bool("compare-go", false, "also chunk every Go file on both Go paths (go/parser, tree-sitter) and report the files whose chunks differ")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: codectx bench-parse [flags] PATH\n\nParses every file of a snapshot with tree-sitter alone, with chunk.Parse, and the Go files with go/parser, one goroutine, and prints MB per CPU second of each.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("bench-parse: want exactly one PATH, got %d", fs.NArg())
	}
	snap, err := source.Open(ctx, fs.Arg(0), source.Options{})
	if err != nil {
		return fmt.Errorf("bench-parse: %w", err)
	}
	defer snap.Close()
	type file struct {
		path string
		src  []byte
	}
	var all, grammar, goFiles []file
	opt := chunk.Options{MaxFileSize: *maxSize}
	for _, f := range snap.Files {
		if f.Size > *maxSize {
			continue
		}
		src, err := snap.Read(f)
		if err != nil {
			return fmt.Errorf("bench-parse: read %s: %w", f.Path, err)
		}
		ff := file{f.Path, src}
		all = append(all, ff)
		// The files tree-sitter parses when indexing; a first parse
		// also warms the parser pools and compiles nothing else.
		if chunk.ParseOnly(f.Path, src, opt) {
			grammar = append(grammar, ff)
			if chunk.Detect(f.Path, src) == codectx.Go {
				goFiles = append(goFiles, ff)
			}
		}
	}
	measure := func(name string, files []file, fn func(file)) ParseRate {
		runtime.GC()
		r := ParseRate{Name: name, Files: len(files)}
		for _, f := range files {
			r.Bytes += int64(len(f.src))
		}
		r.Bytes *= int64(*rounds)
		cpu0, t0 := cpuSeconds(), time.Now()
		for range *rounds {
			for _, f := range files {
				fn(f)
			}
		}
		r.CPUSeconds, r.Seconds = cpuSeconds()-cpu0, time.Since(t0).Seconds()
		if r.CPUSeconds > 0 {
			r.MBPerCore = float64(r.Bytes) / 1e6 / r.CPUSeconds
		}
		return r
	}
	var goErrs int
	tsOpt, astOpt := opt, opt
	tsOpt.GoParser, astOpt.GoParser = chunk.GoTreeSitter, chunk.GoAST
	rows := []ParseRate{
		measure("tree-sitter parse (files with a grammar)", grammar, func(f file) { chunk.ParseOnly(f.path, f.src, opt) }),
		measure("chunk.Parse (files with a grammar)", grammar, func(f file) { chunk.Parse(ctx, f.path, f.src, opt) }),
		measure("chunk.Parse (every file, as index)", all, func(f file) { chunk.Parse(ctx, f.path, f.src, opt) }),
		measure("tree-sitter parse (Go files)", goFiles, func(f file) { chunk.ParseOnly(f.path, f.src, opt) }),
		measure("go/parser (Go files, comments, no resolution)", goFiles, func(f file) {
			if _, err := parser.ParseFile(token.NewFileSet(), f.path, f.src, parser.ParseComments|parser.SkipObjectResolution); err != nil {
				goErrs++
			}
		}),
		measure("chunk.Parse, Go files, tree-sitter path", goFiles, func(f file) { chunk.Parse(ctx, f.path, f.src, tsOpt) }),
		measure("chunk.Parse, Go files, go/parser path", goFiles, func(f file) { chunk.Parse(ctx, f.path, f.src, astOpt) }),
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var cmp *goCompare
	if *compareGo {
		cmp = &goCompare{Fallbacks: map[string]int{}}
		for _, f := range all {
			if chunk.Detect(f.path, f.src) != codectx.Go {
				continue
			}
			cmp.Files++
			if fb := chunk.GoFallback(f.path, f.src, opt); fb != "" {
				cmp.Fallbacks[fb]++
			}
			// A long timeout: tree-sitter's parse must not time out
			// on a loaded machine (the go/parser path has none).
			ts, ga := tsOpt, astOpt
			ts.ParseTimeout, ga.ParseTimeout = time.Minute, time.Minute
			a, b := chunk.Parse(ctx, f.path, f.src, ts), chunk.Parse(ctx, f.path, f.src, ga)
			if !reflect.DeepEqual(a, b) {
				cmp.Differ = append(cmp.Differ, f.path)
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if *asJSON {
		if cmp != nil {
			return writeIndented(stdout, struct {
				Rows    []ParseRate `json:"rows"`
				Compare *goCompare  `json:"compare_go"`
			}{rows, cmp})
		}
		return writeIndented(stdout, rows)
	}
	fmt.Fprintf(stdout, "%-48s %7s %9s %8s %8s %10s\n", "parser", "files", "MB", "CPU s", "wall s", "MB/CPU s")
	for _, r := range rows {
		fmt.Fprintf(stdout, "%-48s %7d %9.2f %8.2f %8.2f %10.2f\n", r.Name, r.Files, float64(r.Bytes)/1e6, r.CPUSeconds, r.Seconds, r.MBPerCore)
	}
	if goErrs > 0 {
		fmt.Fprintf(stdout, "go/parser reported errors in %d files (they were still parsed)\n", goErrs/max(*rounds, 1))
	}
	if cmp != nil {
		fb := 0
		for _, n := range cmp.Fallbacks {
			fb += n
		}
		fmt.Fprintf(stdout, "Go paths compared on %d Go files: %d differ, %d handed to tree-sitter by the go/parser path %v\n", cmp.Files, len(cmp.Differ), fb, cmp.Fallbacks)
		for _, p := range cmp.Differ {
			fmt.Fprintf(stdout, "differs: %s\n", p)
		}
	}
	return nil
}

// goCompare is the outcome of `bench-parse -compare-go`: every Go file
// chunked on both Go paths.
type goCompare struct {
	Files     int            `json:"files"`
	Differ    []string       `json:"differ"`    // files whose results differ (should be none)
	Fallbacks map[string]int `json:"fallbacks"` // files the go/parser path hands to tree-sitter, by reason
}

// cpuSeconds is the user and system CPU of this process so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
