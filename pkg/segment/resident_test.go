package segment

import (
	"testing"
	"time"
)

// TestResidentSizeEvery checks that the page-table read is throttled: the
// first call measures, a second within the interval reports -1 (as last
// measured), and a zero interval measures every time.
func TestResidentSizeEvery(t *testing.T) {
	s := &Segment{}
	if got := s.ResidentSizeEvery(time.Hour); got != 0 {
		t.Fatalf("first call: %d, want a measure (0)", got)
	}
	if got := s.ResidentSizeEvery(time.Hour); got != -1 {
		t.Fatalf("second call within the hour: %d, want -1", got)
	}
	for range 3 {
		if got := s.ResidentSizeEvery(0); got != 0 {
			t.Fatalf("zero interval: %d, want a measure (0)", got)
		}
	}
}
