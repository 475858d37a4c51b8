package workflows

import (
	"testing"
	"time"
)

// TestQuiet: a wait's quiet time grows while what it waits for stays the
// same and some is out, and starts again when it moves or nothing is out
// (a stage no worker consumed showed an unchanging stage, and nothing
// else).
func TestQuiet(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var q quiet
	for _, step := range []struct {
		left int
		at   time.Duration
		want int
	}{
		{10, 0, 0},
		{10, 30 * time.Second, 30},
		{10, 150 * time.Second, 150},
		{9, 151 * time.Second, 0}, // a result came in
		{9, 200 * time.Second, 49},
		{0, 300 * time.Second, 0}, // nothing out
		{0, 400 * time.Second, 0},
		{4, 401 * time.Second, 0}, // the next batches
		{4, 402 * time.Second, 1},
	} {
		if got := q.see(step.left, t0.Add(step.at)); got != step.want {
			t.Errorf("see(%d) at %v = %d, want %d", step.left, step.at, got, step.want)
		}
	}
}
