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
func (s *Snapshot) IsAncestor(other string) (bool, error) {
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
	if err != nil {
		return false, fmt.Errorf("is %s an ancestor of %s: %w", g.commit.Hash, other, err)
	}
	anc, err := g.commit.IsAncestor(oc)
	if err != nil {
		return false, fmt.Errorf("is %s an ancestor of %s: %w", g.commit.Hash, other, err)
	}
	return anc, nil
}

// Descends reports whether other (a commit hash) is an ancestor of the
// snapshot's commit: whether moving from other to this snapshot goes
// forward in history. It is false when other is not in the repository
// (a force-pushed history) and for snapshots without git.
func (s *Snapshot) Descends(other string) (bool, error) {
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
	if err != nil {
		return false, fmt.Errorf("is %s an ancestor of %s: %w", other, g.commit.Hash, err)
	}
	anc, err := oc.IsAncestor(g.commit)
	if err != nil {
		return false, fmt.Errorf("is %s an ancestor of %s: %w", other, g.commit.Hash, err)
	}
	return anc, nil
}
