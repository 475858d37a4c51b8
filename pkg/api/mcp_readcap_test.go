package api

import (
	"context"
	"strings"
	"testing"

	"codectx/pkg/blob"
)

// The read tool returns at most maxReadBytes of text (whole lines), and
// end_line says where it stopped so the next call goes on from there:
// 2000 lines of a file near the 1 MiB limit were returned whole, about
// 10 MB of heap per call (audit 5).
func TestReadCapsBytes(t *testing.T) {
	store := blob.NewMem()
	line := strings.Repeat("x", 498) + "\n"
	fixture(t, store, strings.Repeat(line, 1900))
	s := &Server{Store: store}
	s.init()
	p := Principal{Tenant: "default"}
	out, err := s.toolRead(context.Background(), p, ReadInput{Repo: "demo", Path: "util/strings.go", EndLine: 2000})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Text) > 256<<10 || out.EndLine >= out.TotalLines || strings.Count(out.Text, "\n") != out.EndLine-out.StartLine+1 {
		t.Fatalf("read of lines 1-2000 of a %d-line file: %d bytes, lines %d-%d; want at most %d bytes of whole lines", out.TotalLines, len(out.Text), out.StartLine, out.EndLine, 256<<10)
	}
	next, err := s.toolRead(context.Background(), p, ReadInput{Repo: "demo", Path: "util/strings.go", StartLine: out.EndLine + 1, EndLine: out.EndLine + 1})
	if err != nil || next.StartLine != out.EndLine+1 || len(next.Text) == 0 {
		t.Fatalf("the next line after the cut: %+v %v", next, err)
	}
}
