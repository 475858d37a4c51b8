package source

import (
	"errors"
	"fmt"

	"github.com/go-git/go-git/v5/plumbing"
)

// IsAncestor reports whether the snapshot's commit is an ancestor of
// other (a commit hash): whether moving from other to this snapshot goes
// back in history. It is false when other is not in the repository (a
// force-pushed history) and for snapshots without git.
func (s *Snapshot) IsAncestor(other string) (bool, error) { return s.ancestry(other, true) }

// Descends reports whether other (a commit hash) is an ancestor of the
// snapshot's commit: whether moving from other to this snapshot goes
// forward in history. It is false when other is not in the repository
// (a force-pushed history) and for snapshots without git.
func (s *Snapshot) Descends(other string) (bool, error) { return s.ancestry(other, false) }

// ancestry is IsAncestor (back) or Descends.
func (s *Snapshot) ancestry(other string, back bool) (bool, error) {
	g, ok := s.src.(*gitReader)
	if !ok || g.commit == nil {
		return false, nil
	}
	h, ok := parseHash(other)
	if !ok || h == g.commit.Hash {
		return false, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	oc, err := g.repo.CommitObject(h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return false, nil
	}
	older, newer := g.commit, oc
	if !back {
		older, newer = oc, g.commit
	}
	if err == nil {
		var anc bool
		if anc, err = older.IsAncestor(newer); err == nil {
			return anc, nil
		}
	}
	if back {
		return false, fmt.Errorf("is %s an ancestor of %s: %w", g.commit.Hash, other, err)
	}
	return false, fmt.Errorf("is %s an ancestor of %s: %w", other, g.commit.Hash, err)
}
