// Package rank is the learned file ranker of the query engine: a small
// model, trained offline (scripts/train-rank.py) on features that the
// engine computes for each candidate file (see query's features.go), and
// shipped as a JSON file in this package. Scoring a file is a dot product
// over a few dozen features (a linear model) or a walk down a few shallow
// trees, so reranking a query's top files takes microseconds.
package rank

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"strings"
)

// Model is a linear scorer over named features, optionally followed by
// regression trees whose outputs are added: score = bias + sum w_i *
// (x_i - mean_i) / scale_i (each term's standardised value clipped to
// [-Clip, Clip] when Clip > 0) + sum trees(x). A feature named "a*b" is the
// product of the engine's features a and b (an interaction, such as a
// list's rank times a trigger flag).
type Model struct {
	Kind     string    `json:"kind"` // "linear"
	Features []string  `json:"features"`
	Mean     []float64 `json:"mean"`
	Scale    []float64 `json:"scale"`
	Weights  []float64 `json:"weights"`
	Bias     float64   `json:"bias"`
	Trees    []Tree    `json:"trees,omitempty"`
	Depth    int       `json:"depth"` // rerank this many top files of the fused ranking
	// Clip, when above 0, bounds each standardised feature (x_i - mean_i)
	// / scale_i to [-Clip, Clip] (train-rank.py's clip).
	Clip float64 `json:"clip,omitempty"`
	Note string  `json:"note,omitempty"`

	index  []int // model feature i -> position in the caller's vector
	index2 []int // second factor of a product feature, else -1
}

// Tree is one regression tree in array form: node i splits on
// Feature[i] < Threshold[i] (go Left[i], else Right[i]); a node whose
// Left is -1 is a leaf with value Value[i].
type Tree struct {
	Feature   []int     `json:"feature"`
	Threshold []float64 `json:"threshold"`
	Left      []int     `json:"left"`
	Right     []int     `json:"right"`
	Value     []float64 `json:"value"`
}

//go:embed model.json
var shipped []byte

// Shipped returns the model shipped with the binary, bound to names (the
// engine's feature vector layout).
func Shipped(names []string) (*Model, error) { return Parse(shipped, names) }

// Parse decodes a model and binds its features to names: every feature the
// model uses must be among names.
func Parse(data []byte, names []string) (*Model, error) {
	var m Model
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("rank: %w", err)
	}
	if m.Kind != "linear" {
		return nil, fmt.Errorf("rank: unknown model kind %q", m.Kind)
	}
	n := len(m.Features)
	if len(m.Weights) != n || len(m.Mean) != n || len(m.Scale) != n {
		return nil, fmt.Errorf("rank: %d features but %d weights, %d means, %d scales", n, len(m.Weights), len(m.Mean), len(m.Scale))
	}
	pos := map[string]int{}
	for i, s := range names {
		pos[s] = i
	}
	m.index, m.index2 = make([]int, n), make([]int, n)
	for i, f := range m.Features {
		a, b, product := strings.Cut(f, "*")
		p, ok := pos[a]
		q, ok2 := pos[b]
		if !ok || (product && !ok2) {
			return nil, fmt.Errorf("rank: model feature %q is not computed by the engine", f)
		}
		if !product {
			q = -1
		}
		if m.Scale[i] == 0 || math.IsNaN(m.Scale[i]) || math.IsNaN(m.Weights[i]) {
			return nil, fmt.Errorf("rank: feature %q: bad scale or weight", f)
		}
		m.index[i], m.index2[i] = p, q
	}
	for ti, t := range m.Trees {
		k := len(t.Feature)
		if len(t.Threshold) != k || len(t.Left) != k || len(t.Right) != k || len(t.Value) != k {
			return nil, fmt.Errorf("rank: tree %d: arrays of different lengths", ti)
		}
		for i := range t.Feature {
			if t.Left[i] >= k || t.Right[i] >= k || (t.Left[i] >= 0 && (t.Feature[i] < 0 || t.Feature[i] >= n || t.Left[i] <= i || t.Right[i] <= i)) {
				return nil, fmt.Errorf("rank: tree %d: bad node %d", ti, i)
			}
		}
	}
	if m.Clip < 0 || math.IsNaN(m.Clip) {
		return nil, fmt.Errorf("rank: bad clip %v", m.Clip)
	}
	if m.Depth <= 0 {
		m.Depth = 50
	}
	return &m, nil
}

// Uses reports whether the model reads any of the named features (alone
// or in a product).
func (m *Model) Uses(names ...string) bool {
	for _, f := range m.Features {
		a, b, _ := strings.Cut(f, "*")
		for _, n := range names {
			if a == n || b == n {
				return true
			}
		}
	}
	return false
}

// Score scores one candidate's feature vector (in the layout Parse was
// given). Higher is better.
func (m *Model) Score(x []float64) float64 {
	s := m.Bias
	for i := range m.index {
		z := (m.value(x, i) - m.Mean[i]) / m.Scale[i]
		if m.Clip > 0 {
			z = max(-m.Clip, min(m.Clip, z))
		}
		s += m.Weights[i] * z
	}
	for _, t := range m.Trees {
		i := 0
		for t.Left[i] >= 0 {
			if m.value(x, t.Feature[i]) < t.Threshold[i] {
				i = t.Left[i]
			} else {
				i = t.Right[i]
			}
		}
		s += t.Value[i]
	}
	return s
}

// value is model feature i of x.
func (m *Model) value(x []float64, i int) float64 {
	v := x[m.index[i]]
	if j := m.index2[i]; j >= 0 {
		v *= x[j]
	}
	return v
}
