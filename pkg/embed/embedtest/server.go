package embedtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	"codectx/pkg/embed"
)

// Server is an in-test OpenAI-compatible embeddings server (POST
// /v1/embeddings) on loopback. It computes real, deterministic vectors
// with HashEmbed (or a given Embedder's: NewServerFor), so texts sharing words are close, and it can inject
// faults (429 with Retry-After, 5xx, slow answers, wrong dimensions) for
// the drivers' retry tests. Use NewServer; close it with Close.
type Server struct {
	*httptest.Server
	// URL is the base URL to give a driver (no /v1 suffix).
	URL   string
	Dim   int
	Model string
	// Key, if set, is the bearer token every request must carry (401
	// otherwise).
	Key string

	mu        sync.Mutex
	faults    []Fault
	delay     time.Duration
	reverse   bool
	requests  int
	inputs    int
	maxBatch  int
	inFlight  int
	maxFlight int
	lastModel string
	embedder  embed.Embedder
}

// Fault is what the server does to one request instead of answering it.
type Fault struct {
	Status     int           // HTTP status to answer with (0: answer normally, after Delay)
	RetryAfter string        // Retry-After header value, if any
	Delay      time.Duration // wait before answering (or until the client gives up)
	WrongDim   int           // answer normally but with vectors of this length
}

// NewServer starts a server embedding into dim dimensions (dim <= 0:
// 256) under the given model name (empty: "hash-embed").
func NewServer(dim int, model string) *Server {
	if dim <= 0 {
		dim = 256
	}
	if model == "" {
		model = "hash-embed"
	}
	return start(&Server{Dim: dim, Model: model})
}

// NewServerFor starts a server that answers with e's vectors (as
// passages: the API has no query kind, so a client adds any query prefix
// itself), under e's model name and dimension, with the same fault
// injection. It puts a real model, such as the onnx driver's, behind HTTP.
func NewServerFor(e embed.Embedder) *Server {
	return start(&Server{Dim: e.Dim(), Model: e.Model(), embedder: e})
}

func start(s *Server) *Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/embeddings", s.handle)
	mux.HandleFunc("POST /embeddings", s.handle)
	s.Server = httptest.NewServer(mux)
	s.URL = s.Server.URL
	return s
}

// Inject queues faults; each applies to one following request, in order.
func (s *Server) Inject(f ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, f...)
}

// SetDelay makes every answer wait d (0: none).
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// SetReverse makes the server list the data items in reverse order (with
// correct indexes), as the API allows, to check that drivers order by index.
func (s *Server) SetReverse(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reverse = on
}

// Stats is what the server has seen.
type Stats struct {
	Requests    int    // requests received (faulted ones included)
	Inputs      int    // texts embedded in successful answers
	MaxBatch    int    // largest number of inputs in one request
	MaxInFlight int    // most requests being served at once
	LastModel   string // model named by the last request
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{s.requests, s.inputs, s.maxBatch, s.maxFlight, s.lastModel}
}

type request struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format,omitempty"`
}

type item struct {
	Object    string    `json:"object"`
	Index     int       `json:"index"`
	Embedding []float32 `json:"embedding"`
}

type response struct {
	Object string `json:"object"`
	Data   []item `json:"data"`
	Model  string `json:"model"`
	Usage  struct {
		PromptTokens int `json:"prompt_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

func apiError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests++
	s.inFlight++
	s.maxFlight = max(s.maxFlight, s.inFlight)
	var f Fault
	if len(s.faults) > 0 {
		f = s.faults[0]
		s.faults = s.faults[1:]
	}
	delay, reverse := s.delay, s.reverse
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	if f.Delay > 0 {
		delay = f.Delay
	}
	// The body is read first: the server notices a client that gave up
	// (r.Context done) only once the body is consumed.
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if s.Key != "" && r.Header.Get("Authorization") != "Bearer "+s.Key {
		apiError(w, http.StatusUnauthorized, "invalid api key")
		return
	}
	if f.Status != 0 {
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		apiError(w, f.Status, "injected fault "+strconv.Itoa(f.Status))
		return
	}
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		apiError(w, http.StatusBadRequest, "bad json: "+err.Error())
		return
	}
	var texts []string
	if err := json.Unmarshal(req.Input, &texts); err != nil {
		var one string
		if err := json.Unmarshal(req.Input, &one); err != nil {
			apiError(w, http.StatusBadRequest, "input must be a string or an array of strings")
			return
		}
		texts = []string{one}
	}
	if len(texts) == 0 {
		apiError(w, http.StatusBadRequest, "input must not be empty")
		return
	}
	if req.Model != s.Model {
		apiError(w, http.StatusNotFound, fmt.Sprintf("model %q not found", req.Model))
		return
	}
	dim := s.Dim
	if f.WrongDim > 0 {
		dim = f.WrongDim
	}
	var resp response
	resp.Object, resp.Model = "list", s.Model
	for i, t := range texts {
		if t == "" {
			apiError(w, http.StatusBadRequest, fmt.Sprintf("input[%d] is empty", i))
			return
		}
		resp.Usage.PromptTokens += len(identifiers(t))
	}
	var vecs [][]float32
	if s.embedder != nil {
		var err error
		if vecs, err = s.embedder.Embed(r.Context(), texts, embed.Passage); err != nil {
			apiError(w, http.StatusInternalServerError, err.Error())
			return
		}
	}
	for i, t := range texts {
		var v []float32
		switch {
		case vecs != nil && f.WrongDim == 0:
			v = vecs[i]
		default:
			v = HashEmbed(t, dim)
		}
		resp.Data = append(resp.Data, item{"embedding", i, v})
	}
	resp.Usage.TotalTokens = resp.Usage.PromptTokens
	if reverse {
		for i, j := 0, len(resp.Data)-1; i < j; i, j = i+1, j-1 {
			resp.Data[i], resp.Data[j] = resp.Data[j], resp.Data[i]
		}
	}
	s.mu.Lock()
	s.inputs += len(texts)
	s.maxBatch = max(s.maxBatch, len(texts))
	s.lastModel = req.Model
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(resp)
}
