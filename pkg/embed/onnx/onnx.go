// Package onnx is the local embed driver: a BERT-family sentence-embedding
// model (bge-small-en-v1.5, all-MiniLM-L6-v2, e5-small-v2, ...) run
// in-process with ONNX Runtime through github.com/yalue/onnxruntime_go.
//
// A model directory holds model.onnx, its tokenizer.json (WordPiece, see
// pkg/embed/wordpiece) and an optional embedder.json saying how the model
// card pools and prefixes:
//
//	{"name": "bge-small-en-v1.5-q", "pooling": "cls", "normalize": true,
//	 "max_tokens": 512, "query_prefix": "Represent this sentence ...: ",
//	 "passage_prefix": ""}
//
// `make model` (scripts/fetch-model.sh) fetches one, and the ONNX Runtime
// shared library into .cache/lib.
package onnx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	ort "github.com/yalue/onnxruntime_go"

	"codectx/pkg/embed"
	"codectx/pkg/embed/wordpiece"
)

// LibEnv names the environment variable that may give the path of the
// ONNX Runtime shared library.
const LibEnv = "CODECTX_ONNXRUNTIME_LIB"

// Config is a model directory's embedder.json.
type Config struct {
	Name          string `json:"name"`
	Pooling       string `json:"pooling"`   // "cls" or "mean" (default)
	Normalize     *bool  `json:"normalize"` // L2-normalise (default true)
	MaxTokens     int    `json:"max_tokens"`
	QueryPrefix   string `json:"query_prefix"`
	PassagePrefix string `json:"passage_prefix"`
}

// Options tune a driver; the zero value is fine.
type Options struct {
	// Library is the path of libonnxruntime.so. Empty: $CODECTX_ONNXRUNTIME_LIB,
	// then lib/libonnxruntime.so two directories above the model (the
	// .cache/models/NAME layout of make model), then the system's.
	Library string
	// Threads is ONNX Runtime's intra-op thread count for one run (default 1:
	// throughput comes from running batches in parallel).
	Threads int
	// Parallel is the most runs at once (default: the number of CPUs).
	Parallel int
	// MaxBatch is the most texts per run (default 1). Texts are sorted by
	// length before batching, so a batch pads little; still, one text per
	// run measured fastest on CPU (docs/benchmarks.md), and it keeps a
	// text's vector independent of its batch: a quantized model scales its
	// activations over the whole batch tensor, padding included, which moves
	// a short text batched with a long one to cosine ~0.99 of itself alone.
	MaxBatch int
	// MaxTokens overrides the config's token limit (ids with [CLS]/[SEP]).
	MaxTokens int
}

// Embedder is the driver; safe for concurrent use. Close it to free the
// session.
type Embedder struct {
	cfg     Config
	o       Options
	tok     *wordpiece.Tokenizer
	sess    *ort.DynamicAdvancedSession
	typeIDs bool // the model takes token_type_ids
	pooled  bool // the output is already [batch, dim]
	dim     int
	sem     chan struct{}
}

var (
	_ embed.Embedder = (*Embedder)(nil)
	_ embed.Limiter  = (*Embedder)(nil)
)

var env struct {
	sync.Mutex
	lib string
}

// initRuntime loads the shared library once per process.
func initRuntime(lib string) error {
	env.Lock()
	defer env.Unlock()
	if ort.IsInitialized() {
		if lib != env.lib {
			return fmt.Errorf("onnx: runtime already loaded from %s, not %s", env.lib, lib)
		}
		return nil
	}
	ort.SetSharedLibraryPath(lib)
	if err := ort.InitializeEnvironment(); err != nil {
		return fmt.Errorf("onnx: loading ONNX Runtime from %s: %w (make model fetches it into .cache/lib; or set %s)", lib, err, LibEnv)
	}
	env.lib = lib
	return nil
}

// FindLibrary returns the ONNX Runtime library Open would use for a model
// directory, and whether that file exists (false for the bare system name).
func FindLibrary(dir string) (string, bool) {
	if p := os.Getenv(LibEnv); p != "" {
		return p, fileExists(p)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		p := filepath.Join(filepath.Dir(filepath.Dir(abs)), "lib", "libonnxruntime.so")
		if fileExists(p) {
			return p, true
		}
	}
	return "libonnxruntime.so", false
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// ReadConfig reads dir/embedder.json; a missing file gives the defaults
// (mean pooling, normalised, 512 tokens, no prefixes, named after dir).
func ReadConfig(dir string) (Config, error) {
	c := Config{}
	data, err := os.ReadFile(filepath.Join(dir, "embedder.json"))
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return c, err
	default:
		if err := json.Unmarshal(data, &c); err != nil {
			return c, fmt.Errorf("%s/embedder.json: %w", dir, err)
		}
	}
	if c.Name == "" {
		abs, _ := filepath.Abs(dir)
		c.Name = filepath.Base(abs)
	}
	if c.Pooling == "" {
		c.Pooling = "mean"
	}
	if c.Pooling != "mean" && c.Pooling != "cls" {
		return c, fmt.Errorf("%s/embedder.json: pooling %q: want cls or mean", dir, c.Pooling)
	}
	if c.Normalize == nil {
		t := true
		c.Normalize = &t
	}
	if c.MaxTokens <= 0 {
		c.MaxTokens = 512
	}
	return c, nil
}

// Open loads the model in dir.
func Open(dir string, o Options) (*Embedder, error) {
	cfg, err := ReadConfig(dir)
	if err != nil {
		return nil, fmt.Errorf("onnx: %w", err)
	}
	if o.MaxTokens > 0 && o.MaxTokens != cfg.MaxTokens {
		// Vectors of texts cut at another limit are other vectors: the
		// model's name (which keys the embedding cache and the vector
		// collection) says the limit, so they never mix.
		cfg.MaxTokens = o.MaxTokens
		cfg.Name = fmt.Sprintf("%s@max_tokens=%d", cfg.Name, o.MaxTokens)
	}
	if o.Threads <= 0 {
		o.Threads = 1
	}
	if o.Parallel <= 0 {
		o.Parallel = runtime.NumCPU()
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 1
	}
	tok, err := wordpiece.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("onnx: %w", err)
	}
	model := filepath.Join(dir, "model.onnx")
	if !fileExists(model) {
		return nil, fmt.Errorf("onnx: %s: no model.onnx (make model fetches one)", dir)
	}
	lib := o.Library
	if lib == "" {
		lib, _ = FindLibrary(dir)
	}
	if err := initRuntime(lib); err != nil {
		return nil, err
	}
	ins, outs, err := ort.GetInputOutputInfo(model)
	if err != nil {
		return nil, fmt.Errorf("onnx: %s: %w", model, err)
	}
	e := &Embedder{cfg: cfg, o: o, tok: tok, sem: make(chan struct{}, o.Parallel)}
	names := []string{"input_ids", "attention_mask"}
	have := map[string]bool{}
	for _, in := range ins {
		have[in.Name] = true
	}
	for _, n := range names {
		if !have[n] {
			return nil, fmt.Errorf("onnx: %s has no input %q (inputs: %v)", model, n, ins)
		}
	}
	if have["token_type_ids"] {
		names = append(names, "token_type_ids")
		e.typeIDs = true
	}
	if len(ins) != len(names) {
		return nil, fmt.Errorf("onnx: %s wants inputs %v; a BERT encoder takes input_ids, attention_mask and token_type_ids", model, ins)
	}
	if len(outs) == 0 {
		return nil, fmt.Errorf("onnx: %s has no output", model)
	}
	out := outs[0]
	for _, x := range outs {
		if x.Name == "last_hidden_state" {
			out = x
		}
	}
	switch len(out.Dimensions) {
	case 3:
	case 2:
		e.pooled = true
	default:
		return nil, fmt.Errorf("onnx: %s: output %s has shape %v, want [batch, seq, dim] or [batch, dim]", model, out.Name, out.Dimensions)
	}
	if d := out.Dimensions[len(out.Dimensions)-1]; d > 0 {
		e.dim = int(d)
	}
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("onnx: %w", err)
	}
	defer so.Destroy()
	if err := so.SetIntraOpNumThreads(o.Threads); err != nil {
		return nil, fmt.Errorf("onnx: threads: %w", err)
	}
	if err := so.SetInterOpNumThreads(1); err != nil {
		return nil, fmt.Errorf("onnx: threads: %w", err)
	}
	e.sess, err = ort.NewDynamicAdvancedSession(model, names, []string{out.Name}, so)
	if err != nil {
		return nil, fmt.Errorf("onnx: %s: %w", model, err)
	}
	// One run checks the model and, if its shape did not say, the dimension.
	v, err := e.run(context.Background(), [][]int32{tok.Encode("probe", cfg.MaxTokens)})
	if err != nil {
		e.sess.Destroy()
		return nil, fmt.Errorf("onnx: %s: first run: %w", model, err)
	}
	if e.dim == 0 {
		e.dim = len(v[0])
	}
	return e, nil
}

// Dim is the vector length.
func (e *Embedder) Dim() int { return e.dim }

// Model is the config's name (the directory's by default).
func (e *Embedder) Model() string { return e.cfg.Name }

// MaxTokens is the input limit in tokens, [CLS] and [SEP] included.
func (e *Embedder) MaxTokens() int { return e.cfg.MaxTokens }

// Config is the model's configuration as read from embedder.json.
func (e *Embedder) Config() Config { return e.cfg }

// Close frees the session.
func (e *Embedder) Close() error {
	return e.sess.Destroy()
}

// Tokens returns the ids a text is embedded from (prefix, truncation and
// [CLS]/[SEP] included).
func (e *Embedder) Tokens(text string, kind embed.Kind) []int32 {
	return e.tok.Encode(e.prefix(kind)+text, e.cfg.MaxTokens)
}

func (e *Embedder) prefix(kind embed.Kind) string {
	if kind == embed.Query {
		return e.cfg.QueryPrefix
	}
	return e.cfg.PassagePrefix
}

// Embed tokenizes texts, sorts them by length, and runs batches of up to
// MaxBatch, up to Parallel at once.
func (e *Embedder) Embed(ctx context.Context, texts []string, kind embed.Kind) ([][]float32, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(texts) == 0 {
		return [][]float32{}, nil
	}
	ids := make([][]int32, len(texts))
	order := make([]int, len(texts))
	for i, t := range texts {
		ids[i] = e.Tokens(t, kind)
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return len(ids[a]) - len(ids[b]) })
	out := make([][]float32, len(texts))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for lo := 0; lo < len(order); lo += e.o.MaxBatch {
		idx := order[lo:min(lo+e.o.MaxBatch, len(order))]
		acquired := false
		select {
		case e.sem <- struct{}{}:
			acquired = true
		case <-ctx.Done():
		}
		if !acquired {
			break
		}
		if ctx.Err() != nil {
			<-e.sem
			break
		}
		wg.Go(func() {
			defer func() { <-e.sem }()
			batch := make([][]int32, len(idx))
			for j, i := range idx {
				batch[j] = ids[i]
			}
			v, err := e.run(ctx, batch)
			if err != nil {
				once.Do(func() { first = err; cancel(err) })
				return
			}
			for j, i := range idx {
				out[i] = v[j]
			}
		})
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = context.Cause(ctx)
	}
	if first != nil {
		return nil, fmt.Errorf("onnx embedder %s: %w", e.cfg.Name, first)
	}
	return out, nil
}

// run embeds one batch of token ids.
func (e *Embedder) run(ctx context.Context, batch [][]int32) ([][]float32, error) {
	n, seq := len(batch), 0
	for _, b := range batch {
		seq = max(seq, len(b))
	}
	idData := make([]int64, n*seq)
	maskData := make([]int64, n*seq)
	pad := int64(e.tok.Pad())
	for i, b := range batch {
		row := idData[i*seq : (i+1)*seq]
		for j := range row {
			row[j] = pad
		}
		for j, id := range b {
			row[j] = int64(id)
			maskData[i*seq+j] = 1
		}
	}
	shape := ort.NewShape(int64(n), int64(seq))
	var inputs []ort.Value
	defer func() {
		for _, v := range inputs {
			v.Destroy()
		}
	}()
	for _, data := range [][]int64{idData, maskData} {
		t, err := ort.NewTensor(shape, data)
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, t)
	}
	if e.typeIDs {
		t, err := ort.NewTensor(shape, make([]int64, n*seq))
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, t)
	}
	ro, err := ort.NewRunOptions()
	if err != nil {
		return nil, err
	}
	defer ro.Destroy()
	stop := context.AfterFunc(ctx, func() { ro.Terminate() })
	outputs := []ort.Value{nil}
	err = e.sess.RunWithOptions(inputs, outputs, ro)
	stop()
	if outputs[0] != nil {
		defer outputs[0].Destroy()
	}
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	if err != nil {
		return nil, err
	}
	t, ok := outputs[0].(*ort.Tensor[float32])
	if !ok {
		return nil, fmt.Errorf("output is %T, want a float32 tensor", outputs[0])
	}
	data, oshape := t.GetData(), t.GetShape()
	var dim int
	if e.pooled {
		if len(oshape) != 2 || oshape[0] != int64(n) {
			return nil, fmt.Errorf("output shape %v for %d texts", oshape, n)
		}
		dim = int(oshape[1])
	} else {
		if len(oshape) != 3 || oshape[0] != int64(n) || oshape[1] != int64(seq) {
			return nil, fmt.Errorf("output shape %v for %d texts of %d tokens", oshape, n, seq)
		}
		dim = int(oshape[2])
	}
	if e.dim != 0 && dim != e.dim {
		return nil, fmt.Errorf("%w: model gave %d, want %d", embed.ErrDim, dim, e.dim)
	}
	res := make([][]float32, n)
	for i, b := range batch {
		v := make([]float32, dim)
		switch {
		case e.pooled:
			copy(v, data[i*dim:(i+1)*dim])
		case e.cfg.Pooling == "cls":
			copy(v, data[i*seq*dim:i*seq*dim+dim])
		default: // mean over the real tokens
			acc := make([]float64, dim)
			for j := range b {
				row := data[(i*seq+j)*dim : (i*seq+j+1)*dim]
				for k, x := range row {
					acc[k] += float64(x)
				}
			}
			for k := range v {
				v[k] = float32(acc[k] / float64(len(b)))
			}
		}
		if *e.cfg.Normalize {
			normalize(v)
		}
		res[i] = v
	}
	return res, nil
}

func normalize(v []float32) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s == 0 {
		return
	}
	inv := 1 / math.Sqrt(s)
	for i := range v {
		v[i] = float32(float64(v[i]) * inv)
	}
}
