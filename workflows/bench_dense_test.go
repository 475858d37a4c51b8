package workflows_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"codectx/pkg/embed"
	"codectx/pkg/embed/embedders"
	"codectx/pkg/embed/embedtest"
	"codectx/pkg/index"
	"codectx/pkg/testrepo"
	"codectx/workflows"
)

// goCorpus is a git repository of the non-test Go files of $GOROOT/src
// under dirs, a real code base of a known size.
func goCorpus(b *testing.B, dirs ...string) (*testrepo.Repo, string, string) {
	b.Helper()
	files := map[string]string{}
	for _, d := range dirs {
		root := filepath.Join(runtime.GOROOT(), "src", d)
		err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || strings.Contains(p, "testdata") {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(filepath.Join(runtime.GOROOT(), "src"), p)
			files[filepath.ToSlash(rel)] = string(data)
			return nil
		})
		if err != nil {
			b.Skipf("corpus: %v", err)
		}
	}
	r := testrepo.New(b)
	first := r.Commit("import", files)
	// The one-file change: a function added to the first file.
	var name string
	for p := range files {
		if name == "" || p < name {
			name = p
		}
	}
	return r, first, name
}

// BenchmarkIndexDense is the index time of `up` with and without the
// embed stage, side by side in one run: the first index of a repository
// of about 10k chunks ($GOROOT/src/net, encoding, go and crypto) and a one-file change
// after it, with no embedder and with the OpenAI-compatible driver against
// the in-test server (hashing, so the figure is the pipeline's own cost of
// embedding: planning, the embed queue, the cache, the vector store), and,
// when make model has fetched it, the real default model on a smaller
// repository ($GOROOT/src/net/url, mime and container: about 300 chunks).
// Run with -benchtime 1x; it reports seconds and the snapshot's counts.
func BenchmarkIndexDense(b *testing.B) {
	srv := embedtest.NewServer(384, "bench-embed")
	b.Cleanup(srv.Close)
	httpEmb, err := embedders.Open(context.Background(), "openai:"+srv.URL+"#bench-embed")
	if err != nil {
		b.Fatal(err)
	}
	type tc struct {
		name string
		dirs []string
		emb  func(b *testing.B) embed.Embedder
	}
	none := func(*testing.B) embed.Embedder { return nil }
	big := []string{"net", "encoding", "go", "crypto"}
	small := []string{"net/url", "mime", "container"}
	onnx := func(b *testing.B) embed.Embedder {
		dir := filepath.Join("..", ".cache", "models", "bge-small-en-v1.5-q")
		if _, err := os.Stat(dir); err != nil {
			b.Skip("no default model (make model)")
		}
		e, err := embedders.Open(context.Background(), "onnx:"+dir)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { embed.Close(e) })
		return e
	}
	for _, c := range []tc{
		{"10k/none", big, none},
		{"10k/http", big, func(*testing.B) embed.Embedder { return httpEmb }},
		{"small/none", small, none},
		{"small/onnx", small, onnx},
		// The real model on the 10k-chunk repository: about ten minutes of
		// both cores, so only when asked (CODECTX_BENCH_ONNX_10K=1).
		{"10k/onnx", big, func(b *testing.B) embed.Embedder {
			if os.Getenv("CODECTX_BENCH_ONNX_10K") == "" {
				b.Skip("set CODECTX_BENCH_ONNX_10K=1 to run the real model on 10k chunks")
			}
			return onnx(b)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			emb := c.emb(b)
			r, first, file := goCorpus(b, c.dirs...)
			for b.Loop() {
				e := newDenseEnv(b, emb)
				start := time.Now()
				e.pushAndWaitHead(b, "corpus", r.Dir, first)
				firstS := time.Since(start).Seconds()
				res := e.last(b, "corpus")
				content, err := os.ReadFile(filepath.Join(r.Dir, filepath.FromSlash(file)))
				if err != nil {
					b.Fatal(err)
				}
				next := r.Commit("one file", map[string]string{file: string(content) + "\n// BenchAdded is new.\nfunc BenchAdded() int { return 1 }\n"})
				start = time.Now()
				e.pushAndWaitHead(b, "corpus", r.Dir, next)
				changeS := time.Since(start).Seconds()
				res2 := e.last(b, "corpus")
				e.stop()
				b.ReportMetric(firstS, "first-s")
				b.ReportMetric(changeS, "change-s")
				b.ReportMetric(float64(res.Files), "files")
				b.ReportMetric(float64(res.Points), "points")
				b.ReportMetric(float64(res.Embedded), "embedded")
				b.ReportMetric(float64(res2.Embedded), "change-embedded")
			}
		})
	}
}

// last is the result of the repository's last finished snapshot.
func (e *env) last(b *testing.B, repo string) *workflows.SnapshotResult {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		st, err := workflows.Status(ctx, e.c, index.DefaultTenant, repo)
		if err == nil && st.State == workflows.StateIdle && st.Last != nil {
			return st.Last
		}
		select {
		case <-ctx.Done():
			b.Fatalf("status of %s: %+v, %v", repo, st, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
