package graph

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

func allFixtures() []fixture {
	return []fixture{goFixture(), pythonFixture(), tsFixture(), javaFixture(), rustFixture()}
}

func TestMarshalRoundTrip(t *testing.T) {
	for _, fx := range append(allFixtures(), fixture{name: "empty"}) {
		t.Run(fx.name, func(t *testing.T) {
			g := Build(fx.in)
			data, err := g.MarshalBinary()
			if err != nil {
				t.Fatalf("MarshalBinary: %v", err)
			}
			h, err := Load(data)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if got, want := h.Edges(), g.Edges(); !slices.Equal(got, want) {
				t.Errorf("Edges after Load =\n %v\nwant\n %v", got, want)
			}
			if got, want := h.Stats(), g.Stats(); got != want {
				t.Errorf("Stats after Load = %+v, want %+v", got, want)
			}
			if got, want := h.Files(), g.Files(); !slices.Equal(got, want) {
				t.Errorf("Files after Load = %v, want %v", got, want)
			}
			for _, p := range g.Files() {
				if got, want := h.FileNeighbors(p), g.FileNeighbors(p); !slices.Equal(got, want) {
					t.Errorf("FileNeighbors(%s) after Load = %v, want %v", p, got, want)
				}
			}
			again, _ := h.MarshalBinary()
			if !bytes.Equal(again, data) {
				t.Errorf("re-encoding differs: %d bytes vs %d", len(again), len(data))
			}
		})
	}
}

func TestLoadCorrupt(t *testing.T) {
	good, err := Build(rustFixture().in).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		return b
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"nil", nil},
		{"short", good[:5]},
		{"bad magic", flip(0)},
		{"bad version", flip(4)},
		{"flipped body byte", flip(len(good) / 2)},
		{"flipped checksum", flip(len(good) - 1)},
		{"truncated", good[:len(good)-7]},
		{"trailing garbage", append(bytes.Clone(good), 0)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := Load(tt.data)
			if err == nil {
				t.Fatalf("Load succeeded (%d files), want error", len(g.Files()))
			}
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("error %v does not wrap ErrCorrupt", err)
			}
		})
	}
}

// TestLoadValidChecksumBadBody re-seals malformed bodies with a correct
// checksum, so the structural checks (not the CRC) must reject them.
func TestLoadValidChecksumBadBody(t *testing.T) {
	seal := func(body []byte) []byte {
		out := append([]byte(magic), byte(version), 0)
		out = append(out, body...)
		return appendCRC(out)
	}
	tests := []struct {
		name string
		body []byte
	}{
		{"huge file count", []byte{0xff, 0xff, 0xff, 0xff, 0x0f}},
		{"file path past end", []byte{1, 9, 'a'}},
		{"unsorted paths", []byte{2, 1, 'b', 1, 'a', 0, 0, 0, 0, 0, 0, 0}},
		{"symbol file out of range", []byte{1, 1, 'a', 1, 2, 5, 0, 0, 0, 0, 0, 0}},
		{"edge to missing file", []byte{1, 1, 'a', 0, 1, 0, 3, 1, 0, 0, 0, 0, 0}},
		{"self edge", []byte{2, 1, 'a', 1, 'b', 0, 1, 0, 0, 1, 0, 0, 0, 0, 0}},
		{"bad kind", []byte{2, 1, 'a', 1, 'b', 0, 1, 0, 1, 9, 0, 0, 0, 0, 0}},
		{"missing stats", []byte{0, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Load(seal(tt.body)); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Load = %v, want ErrCorrupt", err)
			}
		})
	}
	// Control: the same sealing of a well-formed body loads.
	ok := []byte{2, 1, 'a', 1, 'b', 0, 1, 0, 1, 1, 0, 0, 0, 0, 0}
	g, err := Load(seal(ok))
	if err != nil {
		t.Fatalf("well-formed body: %v", err)
	}
	if e := g.Edges(); len(e) != 1 || e[0] != (Edge{From: "a", To: "b", FromID: -1, ToID: -1, Kind: EdgeImport}) {
		t.Errorf("Edges = %v, want a -> b import", e)
	}
}

func FuzzLoad(f *testing.F) {
	for _, fx := range allFixtures() {
		data, _ := Build(fx.in).MarshalBinary()
		f.Add(data)
	}
	f.Add([]byte{})
	f.Add([]byte(magic))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Load(data)
		if err != nil {
			return
		}
		// Whatever loads must be usable and re-encode to the same bytes.
		for _, p := range g.Files() {
			g.FileNeighbors(p)
		}
		g.ExpandFiles(map[string]float64{"x": 1}, 0)
		g.PageRank(nil, 0, 3)
		again, err := g.MarshalBinary()
		if err != nil {
			t.Fatalf("MarshalBinary of loaded graph: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("loaded graph re-encodes differently")
		}
	})
}

func TestBuildDeterministic(t *testing.T) {
	in := synthetic(1000)
	want, _ := Build(in).MarshalBinary()
	rev := in
	rev.Files = slices.Clone(in.Files)
	slices.Reverse(rev.Files)
	got, _ := Build(rev).MarshalBinary()
	if !bytes.Equal(got, want) {
		t.Errorf("Build depends on file order: %d vs %d bytes", len(got), len(want))
	}
}

// FuzzLoadBody seals arbitrary bodies with a valid header and checksum so
// the fuzzer reaches the structural checks behind the CRC.
func FuzzLoadBody(f *testing.F) {
	for _, fx := range allFixtures() {
		data, _ := Build(fx.in).MarshalBinary()
		f.Add(data[6 : len(data)-4])
	}
	f.Add([]byte{2, 1, 'a', 1, 'b', 0, 1, 0, 1, 1, 0, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, body []byte) {
		data := appendCRC(append(append([]byte(magic), byte(version), 0), body...))
		g, err := Load(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		for _, p := range g.Files() {
			g.FileNeighbors(p)
		}
		for _, e := range g.Edges() {
			if e.FromID >= 0 {
				g.SymbolNeighbors(e.FromID)
			}
		}
		g.ExpandFiles(map[string]float64{"a": 1}, 0)
		g.PageRank(map[string]float64{"a": 1}, 0.85, 3)
		again, _ := g.MarshalBinary()
		if !bytes.Equal(again, data) {
			t.Fatalf("loaded graph re-encodes differently")
		}
	})
}
