package blob_test

import (
	"testing"

	"codectx/pkg/blob"
	"codectx/pkg/blob/drivertest"
)

func TestMemConformance(t *testing.T) {
	drivertest.RunConformance(t, func(*testing.T) *blob.Bucket { return blob.NewMem() })
}

func TestValidKey(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want bool
	}{
		{"a", true},
		{"a/b/c.txt", true},
		{".hidden/x", true},
		{"a..b", true},
		{"...", true},
		{"", false},
		{"/a", false},
		{"a/", false},
		{"a//b", false},
		{"..", false},
		{"a/../b", false},
		{"./a", false},
		{"a\x00", false},
		{`a\b`, false},
	} {
		if got := blob.ValidKey(tc.key) == nil; got != tc.want {
			t.Errorf("ValidKey(%q) ok = %v, want %v", tc.key, got, tc.want)
		}
	}
}
