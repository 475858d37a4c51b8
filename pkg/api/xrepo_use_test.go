package api

import (
	"testing"

	"codectx/pkg/codectx"
)

// TestCrossUse: which spellings in an importing file count as a use of a
// symbol of another repository.
func TestCrossUse(t *testing.T) {
	fn := codectx.KindFunction
	for _, tt := range []struct {
		u     use
		calls []string
		types []string
		want  string
	}{
		// Go: qualified by the package, never bare, never by another package.
		{use{name: "HalfEven", quals: map[string]bool{"round": true}, needQual: true}, []string{"round.HalfEven"}, nil, "call"},
		{use{name: "HalfEven", quals: map[string]bool{"round": true}, needQual: true}, []string{"fixtures.HalfEven", "HalfEven"}, nil, ""},
		{use{name: "Basic", quals: map[string]bool{"billy": true}, needQual: true}, nil, []string{"*billy.Basic"}, "type"},
		// A Go method: any receiver, but qualified.
		{use{name: "Total", needQual: true}, []string{"c.Total"}, nil, "call"},
		{use{name: "Total", needQual: true}, []string{"Total"}, nil, ""},
		// Python, Java, Rust: bare (from-import, static import, use) or by the module, class, owner.
		{use{name: "half_even", quals: map[string]bool{"round": true}}, []string{"half_even"}, nil, "call"},
		{use{name: "halfEven", quals: map[string]bool{"Rounding": true}}, []string{"Rounding.halfEven"}, nil, "call"},
		{use{name: "new", quals: map[string]bool{"Money": true}}, []string{"Money::new"}, nil, "call"},
		{use{name: "new", quals: map[string]bool{"Money": true}}, []string{"Vec::new"}, nil, ""},
		{use{name: "Money", quals: map[string]bool{"money": true}}, []string{"new Money"}, []string{"Option<Money>"}, "call"},
		// JavaScript: any binding.
		{use{name: "formatAmount"}, []string{"m.formatAmount"}, nil, "call"},
	} {
		if got := tt.u.uses(codectx.Chunk{Kind: fn, Calls: tt.calls, Types: tt.types}); got != tt.want {
			t.Errorf("%+v uses %v %v = %q, want %q", tt.u, tt.calls, tt.types, got, tt.want)
		}
	}
}
