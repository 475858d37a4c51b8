package natsq

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// TestRestSchedule: a share that holds a message and whose pulls find
// nothing, its counts unchanged, is added by the scans after 1, 2, 4 and
// then every 8 scans (restMax 4 s, a scan every 0.5 s); a change of its
// counts, a notice, a message taken from it and its consumer's removal
// end the rest, and a share that holds nothing is forgotten.
func TestRestSchedule(t *testing.T) {
	t.Cleanup(SetRescan(500 * time.Millisecond))
	t.Cleanup(SetRestMax(4 * time.Second))
	first := []int{1, 2, 4, 8, 16, 24, 32, 40}
	for _, tc := range []struct {
		name  string
		event func(tr *turns, marks map[string]uint64) // before scan 41
		twice bool                                     // two workers' pulls find nothing at each add
		want  []int                                    // scans 41-60 that add the share
	}{
		{"unchanged", nil, false, []int{48, 56}},
		{"two workers", nil, true, []int{48, 56}},
		{"count change", func(_ *turns, marks map[string]uint64) { marks["a"]++ }, false, []int{41, 42, 44, 48, 56}},
		{"notice", func(tr *turns, _ map[string]uint64) {
			tr.add("a", true)
			tr.drop("a", tr.adds["a"], true) // found nothing, once settled
		}, false, []int{41, 43, 47, 55}},
		{"taken", func(tr *turns, _ map[string]uint64) { tr.served("a", tr.adds["a"]) }, false, []int{41, 42, 44, 48, 56}},
		{"consumer removed", func(tr *turns, _ map[string]uint64) { tr.forget("a") }, false, []int{41, 42, 44, 48, 56}},
		{"emptied", func(_ *turns, marks map[string]uint64) { delete(marks, "a") }, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := &turns{
				adds:  map[string]uint64{},
				added: map[string]time.Time{},
				cons:  map[string]jetstream.Consumer{},
				rests: map[string]*rest{},
				wake:  make(chan struct{}, 1),
			}
			marks := map[string]uint64{"a": 1, "b": 7}
			var got []int
			for i := 1; i <= 60; i++ {
				if i == 41 && tc.event != nil {
					tc.event(tr, marks)
				}
				for _, s := range tr.counted(maps.Clone(marks)) {
					if s != "a" {
						continue
					}
					got = append(got, i)
					tr.add(s, false)
					tr.drop(s, tr.adds[s], true)
					if tc.twice {
						tr.drop(s, tr.adds[s], true)
					}
				}
			}
			want := append(slices.Clone(first), tc.want...)
			if !slices.Equal(got, want) {
				t.Errorf("added at scans %v, want %v", got, want)
			}
			if _, ok := marks["a"]; !ok {
				if r := tr.rests["a"]; r != nil {
					t.Errorf("a share that holds nothing keeps its rest %+v", r)
				}
			}
			if n := len(tr.rests); n > len(marks) {
				t.Errorf("%d rests kept for %d shares holding messages", n, len(marks))
			}
		})
	}
}

// TestRestBound: however long a share rests, the scans add it at most
// restMax apart.
func TestRestBound(t *testing.T) {
	for _, tc := range []struct{ rescan, max time.Duration }{
		{500 * time.Millisecond, 4 * time.Second},
		{500 * time.Millisecond, 3 * time.Second},
		{50 * time.Millisecond, 400 * time.Millisecond},
		{time.Minute, 4 * time.Second}, // a scan is the finest step
	} {
		t.Run(fmt.Sprint(tc.rescan, " ", tc.max), func(t *testing.T) {
			t.Cleanup(SetRescan(tc.rescan))
			t.Cleanup(SetRestMax(tc.max))
			tr := &turns{adds: map[string]uint64{}, added: map[string]time.Time{}, rests: map[string]*rest{}, wake: make(chan struct{}, 1)}
			last, gap := 0, 0
			for i := 1; i <= 200; i++ {
				if slices.Contains(tr.counted(map[string]uint64{"a": 1}), "a") {
					gap = max(gap, i-last)
					last = i
					tr.add("a", false)
					tr.drop("a", tr.adds["a"], true)
				}
			}
			if want := max(1, int(tc.max/tc.rescan)); gap != want {
				t.Errorf("scans up to %d apart, want %d", gap, want)
			}
		})
	}
}
