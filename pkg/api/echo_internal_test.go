package api

import (
	"context"
	"strings"
	"testing"
)

// TestErrorsEchoBounded: the read, references and impact tools' errors
// quote at most about a kilobyte of a path or revision they were given
// (an 800 KB path came back as an 800 KB error).
func TestErrorsEchoBounded(t *testing.T) {
	ctx := context.Background()
	s := &Server{Store: manyRepos(t, "acme", 1, "package a\n\nfunc A() {}\n")}
	s.init()
	p := Principal{Tenant: "acme"}
	long := strings.Repeat("a/", 400_000) + "x.go"
	for name, call := range map[string]func() error{
		"read missing":   func() error { _, err := s.toolRead(ctx, p, ReadInput{Repo: "r00", Path: long}); return err },
		"read absolute":  func() error { _, err := s.toolRead(ctx, p, ReadInput{Repo: "r00", Path: "/" + long}); return err },
		"read bad lines": func() error { _, err := s.toolRead(ctx, p, ReadInput{Repo: "r00", Path: long + "#Lx"}); return err },
		"read provenance": func() error {
			_, err := s.toolRead(ctx, p, ReadInput{Path: "r00@" + strings.Repeat("f", 500_000) + ":a.go"})
			return err
		},
		"references missing": func() error {
			_, err := s.toolReferences(ctx, p, ReferencesInput{Repo: "r00", Path: "/" + long})
			return err
		},
		"impact missing": func() error { _, err := s.toolImpact(ctx, p, ImpactInput{Repo: "r00", Path: "/" + long}); return err },
	} {
		err := call()
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if n := len(err.Error()); n > 2048 {
			t.Errorf("%s: an error of %d bytes: %.200s", name, n, err)
		}
	}
}
