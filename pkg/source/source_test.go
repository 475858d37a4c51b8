package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"codectx/pkg/codectx"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

var ctx = context.Background()

var baseFiles = map[string]string{
	"main.go":          "package main\n\nfunc main() {}\n",
	"pkg/util/util.go": "package util\n",
	"README.md":        "# proj\n",
	"docs/a b.txt":     "spaces in names\n",
}

// wantFiles lists files as git sees them in the fixture's HEAD commit.
func wantFiles(t *testing.T, repo *git.Repository) []File {
	t.Helper()
	head, err := repo.Head()
	if err != nil {
		t.Fatal(err)
	}
	c, err := repo.CommitObject(head.Hash())
	if err != nil {
		t.Fatal(err)
	}
	files, err := c.Files()
	if err != nil {
		t.Fatal(err)
	}
	var want []File
	files.ForEach(func(f *object.File) error {
		want = append(want, File{Path: f.Name, Blob: f.Hash.String(), Size: f.Size})
		return nil
	})
	return want
}

func TestOpenLocations(t *testing.T) {
	f := newFixture(t)
	head := f.commit("first", baseFiles)
	want := wantFiles(t, f.repo)
	// The work tree moves on after the commit: git modes must not see it.
	writeFiles(t, f.dir, map[string]string{"main.go": "changed\n", "new.go": "untracked\n"})

	plain := filepath.Join(t.TempDir(), "plain")
	writeFiles(t, plain, baseFiles)
	bare := f.bareClone()

	tests := []struct {
		name, location, repo, commit string
	}{
		{"plain directory", plain, "plain", ""},
		{"clone", f.dir, "proj", head.String()},
		{"dot git", filepath.Join(f.dir, ".git"), "proj", head.String()},
		{"bare", bare, "proj", head.String()},
		{"file URL", "file://" + filepath.ToSlash(bare), "proj", head.String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(ctx, tt.location, Options{CacheDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.Repo != tt.repo || s.Commit != tt.commit {
				t.Errorf("Repo, Commit = %q, %q; want %q, %q", s.Repo, s.Commit, tt.repo, tt.commit)
			}
			if !reflect.DeepEqual(s.Files, want) {
				t.Errorf("Files = %v\nwant %v", s.Files, want)
			}
			for _, file := range s.Files {
				got, err := s.Read(file)
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != baseFiles[file.Path] {
					t.Errorf("Read(%s) = %q, want %q", file.Path, got, baseFiles[file.Path])
				}
			}
		})
	}
}

func TestOpenName(t *testing.T) {
	f := newFixture(t)
	f.commit("first", baseFiles)
	s, err := Open(ctx, f.dir, Options{Name: "acme/proj"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Repo != "acme/proj" {
		t.Errorf("Repo = %q, want acme/proj", s.Repo)
	}
}

func TestRevisions(t *testing.T) {
	f := newFixture(t)
	first := f.commit("first", map[string]string{"a.go": "a1"})
	if _, err := f.repo.CreateTag("v1", first, nil); err != nil {
		t.Fatal(err)
	}
	second := f.commit("second", map[string]string{"b.go": "b"})
	v2, err := f.repo.CreateTag("v2", second, &git.CreateTagOptions{Tagger: sig(9), Message: "annotated"})
	if err != nil {
		t.Fatal(err)
	}
	// A tag of a tag (git tag -a v2-signed v2): go-git peels one level.
	if _, err := f.repo.CreateTag("v2-again", v2.Hash(), &git.CreateTagOptions{Tagger: sig(9), Message: "a tag of v2"}); err != nil {
		t.Fatal(err)
	}
	if err := f.wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName("feature"), Create: true}); err != nil {
		t.Fatal(err)
	}
	feature := f.commit("on feature", map[string]string{"c.go": "c"})
	if err := f.wt.Checkout(&git.CheckoutOptions{Branch: plumbing.Master}); err != nil {
		t.Fatal(err)
	}
	third := f.commit("third", map[string]string{"a.go": "a3"})

	tests := []struct {
		rev   string
		want  plumbing.Hash
		files []string
	}{
		{"", third, []string{"a.go", "b.go"}},
		{"HEAD", third, []string{"a.go", "b.go"}},
		{"master", third, []string{"a.go", "b.go"}},
		{"HEAD~1", second, []string{"a.go", "b.go"}},
		{"HEAD~2", first, []string{"a.go"}},
		{"v1", first, []string{"a.go"}},
		{"v2", second, []string{"a.go", "b.go"}},
		{"v2-again", second, []string{"a.go", "b.go"}},
		{"feature", feature, []string{"a.go", "b.go", "c.go"}},
		{"refs/heads/feature", feature, []string{"a.go", "b.go", "c.go"}},
		{first.String(), first, []string{"a.go"}},
		{first.String()[:8], first, []string{"a.go"}},
	}
	for _, tt := range tests {
		t.Run(tt.rev, func(t *testing.T) {
			s, err := Open(ctx, f.dir, Options{Rev: tt.rev})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if s.Commit != tt.want.String() {
				t.Errorf("Commit = %s, want %s", s.Commit, tt.want)
			}
			if got := paths(s.Files); !reflect.DeepEqual(got, tt.files) {
				t.Errorf("files = %v, want %v", got, tt.files)
			}
		})
	}

	for _, rev := range []string{"nope", "v9", "HEAD~10", "deadbeef"} {
		_, err := Open(ctx, f.dir, Options{Rev: rev})
		if !errors.Is(err, ErrRevisionNotFound) || !strings.Contains(err.Error(), rev) {
			t.Errorf("Open(Rev %q) error = %v, want ErrRevisionNotFound naming it", rev, err)
		}
	}
}

func paths(files []File) []string {
	var ps []string
	for _, f := range files {
		ps = append(ps, f.Path)
	}
	return ps
}

func TestHistory(t *testing.T) {
	f := newFixture(t)
	c1 := f.commit("add a and b", map[string]string{"a.go": "a", "sub/b.go": "b"})
	c2 := f.commit("change both\n\nbody\n", map[string]string{"a.go": "a2", "sub/b.go": "b2"})
	c3 := f.commit("add c, drop a", map[string]string{"c.go": "c"}, "a.go")
	c4 := f.commit("only sub", map[string]string{"sub/d.go": "d"})

	s, err := Open(ctx, f.dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.History(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		hash  plumbing.Hash
		msg   string
		files []string
	}{
		{c4, "only sub", []string{"sub/d.go"}},
		{c3, "add c, drop a", []string{"a.go", "c.go"}},
		{c2, "change both\n\nbody", []string{"a.go", "sub/b.go"}},
		{c1, "add a and b", []string{"a.go", "sub/b.go"}},
	}
	if len(got) != len(want) {
		t.Fatalf("History has %d commits, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Hash != w.hash.String() || g.Message != w.msg || !reflect.DeepEqual(g.Files, w.files) {
			t.Errorf("commit %d = %s %q %v; want %s %q %v", i, g.Hash, g.Message, g.Files, w.hash, w.msg, w.files)
		}
		if g.Author != "Ann Author <ann@example.com>" || !g.When.Equal(sig(len(want)-i).When) {
			t.Errorf("commit %d author %q at %v", i, g.Author, g.When)
		}
	}

	limited, err := s.History(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(limited) != 2 || limited[1].Hash != c3.String() {
		t.Errorf("History(2) = %+v, want c4, c3", limited)
	}

	// A subdirectory snapshot lists the commits touching it, paths relative.
	sub, err := Open(ctx, filepath.Join(f.dir, "sub"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if got, want := paths(sub.Files), []string{"b.go", "d.go"}; !reflect.DeepEqual(got, want) || sub.Commit != c4.String() {
		t.Errorf("sub files = %v at %s, want %v at %s", got, sub.Commit, want, c4)
	}
	hist, err := sub.History(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var gotHist []string
	for _, c := range hist {
		gotHist = append(gotHist, c.Message+":"+strings.Join(c.Files, ","))
	}
	wantHist := []string{"only sub:d.go", "change both\n\nbody:b.go", "add a and b:b.go"}
	if !reflect.DeepEqual(gotHist, wantHist) {
		t.Errorf("sub history = %q, want %q", gotHist, wantHist)
	}
}

func TestHistoryPlainDir(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.go": "a"})
	s, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h, err := s.History(ctx, 10)
	if err != nil || len(h) != 0 {
		t.Errorf("History = %v, %v; want empty", h, err)
	}
}

func TestSpecialEntries(t *testing.T) {
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	lfs := "version https://git-lfs.github.com/spec/v1\noid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n"
	commitTree(t, repo, map[string]entry{
		"main.go":          {mode: filemode.Regular, data: "package main\n"},
		"run.sh":           {mode: filemode.Executable, data: "#!/bin/sh\n"},
		"link":             {mode: filemode.Symlink, data: "main.go"},
		"vendor/lib":       {mode: filemode.Submodule, hash: plumbing.NewHash("1111111111111111111111111111111111111111")},
		"assets/big.bin":   {mode: filemode.Regular, data: lfs},
		"assets/small.txt": {mode: filemode.Regular, data: "version"},
		"empty":            {mode: filemode.Regular, data: ""},
	})
	s, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, want := paths(s.Files), []string{"assets/small.txt", "empty", "main.go", "run.sh"}; !reflect.DeepEqual(got, want) {
		t.Errorf("files = %v, want %v", got, want)
	}
	wantSkipped := []Skipped{
		{"assets/big.bin", codectx.SkipLFSPointer},
		{"link", codectx.SkipSymlink},
		{"vendor/lib", codectx.SkipSubmodule},
	}
	if !reflect.DeepEqual(s.Skipped, wantSkipped) {
		t.Errorf("Skipped = %v, want %v", s.Skipped, wantSkipped)
	}
}

func TestPlainDir(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		".gitignore":          "*.log\nbuild/\n/top.txt\n!keep.log\n# comment\n\n",
		"keep.log":            "kept by negation",
		"app.log":             "ignored",
		"top.txt":             "ignored at the root only",
		"src/top.txt":         "not ignored: anchored rule",
		"src/main.go":         "package main",
		"src/debug.log":       "ignored by the parent rule",
		"src/.gitignore":      "gen/\n*.tmp\n",
		"src/gen/x.go":        "ignored dir",
		"src/a.tmp":           "ignored",
		"other/a.tmp":         "not ignored: rule is src's",
		"build/out":           "ignored dir",
		"lib/build":           "a file named build: dir rule does not apply",
		"vendor/x/.git/HEAD":  "ref: refs/heads/main",
		"vendor/x/x.go":       "package x",
		"lfs.bin":             "version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 3\n",
		"big.txt":             strings.Repeat("0123456789", 500),
		"src/nested/deep.txt": "deep",
	})
	if err := os.Symlink("src/main.go", filepath.Join(dir, "link.go")); err != nil {
		t.Skip("no symlinks:", err)
	}
	if err := os.Symlink("src", filepath.Join(dir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	wantFiles := []string{".gitignore", "big.txt", "keep.log", "lib/build", "other/a.tmp",
		"src/.gitignore", "src/main.go", "src/nested/deep.txt", "src/top.txt", "vendor/x/x.go"}
	if got := paths(s.Files); !reflect.DeepEqual(got, wantFiles) {
		t.Errorf("files = %v\nwant    %v", got, wantFiles)
	}
	wantSkipped := []Skipped{
		{"app.log", codectx.SkipIgnored},
		{"build/", codectx.SkipIgnored},
		{"lfs.bin", codectx.SkipLFSPointer},
		{"link.go", codectx.SkipSymlink},
		{"linkdir", codectx.SkipSymlink},
		{"src/a.tmp", codectx.SkipIgnored},
		{"src/debug.log", codectx.SkipIgnored},
		{"src/gen/", codectx.SkipIgnored},
		{"top.txt", codectx.SkipIgnored},
	}
	if !reflect.DeepEqual(s.Skipped, wantSkipped) {
		t.Errorf("Skipped = %v\nwant      %v", s.Skipped, wantSkipped)
	}
	for _, f := range s.Files {
		data, err := s.Read(f)
		if err != nil {
			t.Fatal(err)
		}
		if want := plumbing.ComputeHash(plumbing.BlobObject, data).String(); f.Blob != want || f.Size != int64(len(data)) {
			t.Errorf("%s: blob %s size %d, want %s size %d", f.Path, f.Blob, f.Size, want, len(data))
		}
	}
	if _, err := s.Read(File{Path: "../outside"}); err == nil {
		t.Error("Read outside the directory succeeded")
	}
}

func TestEmpty(t *testing.T) {
	s, err := Open(ctx, t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Files) != 0 || s.Commit != "" {
		t.Errorf("empty dir: %d files, commit %q", len(s.Files), s.Commit)
	}
	s.Close()

	dir := t.TempDir()
	if _, err := git.PlainInit(dir, false); err != nil {
		t.Fatal(err)
	}
	bare := t.TempDir()
	if _, err := git.PlainInit(bare, true); err != nil {
		t.Fatal(err)
	}
	for _, loc := range []string{dir, bare, "file://" + filepath.ToSlash(bare)} {
		for _, rev := range []string{"", "main"} {
			_, err := Open(ctx, loc, Options{Rev: rev, CacheDir: t.TempDir()})
			if !errors.Is(err, ErrEmptyRepo) {
				t.Errorf("Open(%s, Rev %q) error = %v, want ErrEmptyRepo", loc, rev, err)
			}
		}
	}
}

func TestURLCache(t *testing.T) {
	f := newFixture(t)
	first := f.commit("first", map[string]string{"a.go": "a"})
	url := "file://" + filepath.ToSlash(f.dir)
	cache := t.TempDir()

	s, err := Open(ctx, url, Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s.Commit != first.String() {
		t.Errorf("Commit = %s, want %s", s.Commit, first)
	}

	// New commits, a new branch and a new tag arrive with the next Open.
	second := f.commit("second", map[string]string{"b.go": "b"})
	if _, err := f.repo.CreateTag("v2", second, nil); err != nil {
		t.Fatal(err)
	}
	if err := f.wt.Checkout(&git.CheckoutOptions{Branch: plumbing.NewBranchReferenceName("feature"), Create: true}); err != nil {
		t.Fatal(err)
	}
	feature := f.commit("feature", map[string]string{"c.go": "c"})
	if err := f.wt.Checkout(&git.CheckoutOptions{Branch: plumbing.Master}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		rev  string
		want plumbing.Hash
	}{{"", second}, {"v2", second}, {"feature", feature}, {first.String(), first}} {
		s, err := Open(ctx, url, Options{CacheDir: cache, Rev: tt.rev})
		if err != nil {
			t.Fatalf("Rev %q: %v", tt.rev, err)
		}
		s.Close()
		if s.Commit != tt.want.String() {
			t.Errorf("Rev %q: Commit = %s, want %s", tt.rev, s.Commit, tt.want)
		}
	}
	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("cache holds %d entries, want 1 clone", len(entries))
	}

	// Offline uses the cache as it is, without reaching the origin.
	f.commit("third", map[string]string{"d.go": "d"})
	s, err = Open(ctx, url, Options{CacheDir: cache, Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if s.Commit != second.String() {
		t.Errorf("offline Commit = %s, want %s", s.Commit, second)
	}
	// A branch deleted at the origin is gone from the clone after the
	// next fetch: its old tip is not read as the branch's.
	if err := f.repo.Storer.RemoveReference(plumbing.NewBranchReferenceName("feature")); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(ctx, url, Options{CacheDir: cache, Rev: "refs/heads/feature"}); err == nil {
		s.Close()
		t.Errorf("Rev refs/heads/feature after the origin deleted it: Commit %s, want revision not found", s.Commit)
	} else if !errors.Is(err, ErrRevisionNotFound) {
		t.Errorf("Rev refs/heads/feature after the origin deleted it: %v, want revision not found", err)
	}
	if _, err := Open(ctx, url, Options{CacheDir: t.TempDir(), Offline: true}); err == nil {
		t.Error("offline Open without a cached clone succeeded")
	}
	if _, err := Open(ctx, url, Options{}); err == nil {
		t.Error("URL without CacheDir succeeded")
	}
}

func TestReadConcurrent(t *testing.T) {
	f := newFixture(t)
	files := map[string]string{}
	for i := range 200 {
		files[fmt.Sprintf("d%d/f%d.go", i%7, i)] = strings.Repeat(fmt.Sprintf("line %d\n", i), i+1)
	}
	f.commit("many", files)
	bare := f.bareClone() // packed objects, like real clones
	for _, loc := range []string{f.dir, bare} {
		s, err := Open(ctx, loc, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i, file := range s.Files {
					if i%8 != g && i%3 != 0 { // overlap on purpose
						continue
					}
					got, err := s.Read(file)
					if err != nil {
						errs <- err
						return
					}
					if string(got) != files[file.Path] {
						errs <- fmt.Errorf("%s: wrong content", file.Path)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		s.Close()
	}
}

func TestNames(t *testing.T) {
	tests := []struct{ url, name string }{
		{"https://github.com/psf/requests", "psf/requests"},
		{"https://github.com/psf/requests.git", "psf/requests"},
		{"https://github.com/psf/requests/", "psf/requests"},
		{"git@github.com:gorilla/mux.git", "gorilla/mux"},
		{"ssh://git@github.com:22/gorilla/mux.git", "gorilla/mux"},
		{"https://gitlab.com/group/sub/proj.git", "sub/proj"},
		{"https://example.com/solo", "solo"},
		{"file:///srv/git/proj.git", "proj"},
		{"file:///srv/git/proj/.git", "proj"},
	}
	for _, tt := range tests {
		if got := urlName(tt.url); got != tt.name {
			t.Errorf("urlName(%q) = %q, want %q", tt.url, got, tt.name)
		}
	}
	for _, u := range []string{"https://github.com/psf/requests", "git@github.com:psf/requests.git", "ssh://git@github.com/psf/requests", "file:///srv/git/x y", "a@b:/../.."} {
		if !isURL(u) {
			t.Errorf("isURL(%q) = false", u)
		}
	}
	for _, p := range []string{"proj", "./proj", "/srv/git/proj.git", "C:/src/x", "dir@2024", "x://../../srv", "HTTP://../..", "https://../.."} {
		if isURL(p) {
			t.Errorf("isURL(%q) = true", p)
		}
	}
	a, b := cacheName("acme", "https://github.com/psf/requests"), cacheName("acme", "https://github.com/psf/requests.git")
	if a == b || !strings.HasPrefix(a, "acme@github.com_psf_requests-") || strings.ContainsAny(a, "/:") || SharedCacheName(a) {
		t.Errorf("cacheName = %q, %q", a, b)
	}
	if got := cacheName("acme", "git@github.com:psf/requests.git"); !strings.HasPrefix(got, "acme@github.com_psf_requests-") {
		t.Errorf("cacheName(scp) = %q", got)
	}
	// Each tenant has its own clone of a URL.
	if a, b := cacheName("a", "https://h.example/b-c"), cacheName("a-b", "https://h.example/c"); a == b {
		t.Errorf("two tenants' URLs share %s", a)
	}
	if a, b := cacheName("acme", "https://h.example/x"), cacheName("beta", "https://h.example/x"); a == b {
		t.Errorf("acme's and beta's clones of one URL share %s", a)
	}
}

func TestSubdirFallback(t *testing.T) {
	f := newFixture(t)
	f.commit("first", map[string]string{".gitignore": "out/\n", "src/a.go": "a"})
	writeFiles(t, f.dir, map[string]string{"untracked/x.go": "x", "out/y.go": "y"})
	tests := []struct {
		dir, commit string
		files       []string
	}{
		{"src", "head", []string{"a.go"}},
		{"untracked", "", []string{"x.go"}}, // not in the tree: walked
		{"out", "", []string{"y.go"}},       // ignored by the parent: walked
	}
	for _, tt := range tests {
		s, err := Open(ctx, filepath.Join(f.dir, tt.dir), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := paths(s.Files); !reflect.DeepEqual(got, tt.files) || (s.Commit != "") != (tt.commit != "") || s.Repo != tt.dir {
			t.Errorf("%s: files %v commit %q repo %q; want %v, commit %v", tt.dir, got, s.Commit, s.Repo, tt.files, tt.commit != "")
		}
		s.Close()
	}
}

func TestOpenErrors(t *testing.T) {
	cache := t.TempDir()
	_, err := Open(ctx, "file://"+filepath.ToSlash(filepath.Join(t.TempDir(), "missing")), Options{CacheDir: cache})
	if err == nil {
		t.Fatal("clone of a missing repository succeeded")
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Errorf("failed clone left %d entries in the cache", len(entries))
	}

	if _, err := Open(ctx, filepath.Join(t.TempDir(), "nope"), Options{}); err == nil {
		t.Error("Open of a missing directory succeeded")
	}

	f := newFixture(t)
	f.commit("first", baseFiles)
	plain := t.TempDir()
	writeFiles(t, plain, baseFiles)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	for _, loc := range []string{f.dir, plain} {
		if _, err := Open(canceled, loc, Options{}); !errors.Is(err, context.Canceled) {
			t.Errorf("Open(%s) with a canceled context: %v", loc, err)
		}
	}
}

// Clone cache directories and messages never keep the user information of
// a URL (user:token@).
func TestCacheNameRedacts(t *testing.T) {
	for _, u := range []string{
		"https://user:s3cr3t-token@github.com/acme/shop.git", "https://s3cr3t-token@github.com/acme/shop",
		"https://user:s3cr3t-token@github.com:443/acme/shop", "ssh://git:s3cr3t-token@host.example/acme/shop",
	} {
		if got := cacheName("", u); strings.Contains(got, "s3cr3t") || strings.Contains(got, "user") {
			t.Errorf("cacheName(%q) = %q", u, got)
		}
		if got := Redact(u); strings.Contains(got, "s3cr3t") {
			t.Errorf("Redact(%q) = %q", u, got)
		}
		_, err := Open(context.Background(), u, Options{CacheDir: t.TempDir(), Offline: true})
		if err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("Open(%q) error = %v", u, err)
		}
	}
	if a, b := cacheName("", "https://a:1@h.example/x"), cacheName("", "https://a:2@h.example/x"); a == b {
		t.Errorf("two credentials share a cache directory %q", a)
	}
}

// A local clone of a hosted repository is named as the same repository is
// by its URL (issue 14 item 7); other origins, no origin and a
// subdirectory keep the directory's name.
func TestLocalNameFromOrigin(t *testing.T) {
	tests := []struct{ origin, name string }{
		{"https://github.com/pallets/jinja.git", "pallets/jinja"},
		{"git@github.com:pallets/jinja.git", "pallets/jinja"},
		{"ssh://git@github.com/pallets/jinja", "pallets/jinja"},
		{"file:///srv/git/jinja.git", "proj"},
		{"/srv/git/jinja.git", "proj"},
		{"", "proj"},
	}
	for _, tt := range tests {
		t.Run(tt.origin, func(t *testing.T) {
			f := newFixture(t)
			f.commit("first", map[string]string{"a.go": "package a\n", "sub/b.go": "package sub\n"})
			if tt.origin != "" {
				if _, err := f.repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{tt.origin}}); err != nil {
					t.Fatal(err)
				}
			}
			for _, where := range []string{f.dir, filepath.Join(f.dir, ".git")} {
				if got := RepoName(where); got != tt.name {
					t.Errorf("RepoName(%s) = %q, want %q", where, got, tt.name)
				}
				s, err := Open(ctx, where, Options{})
				if err != nil {
					t.Fatal(err)
				}
				if s.Repo != tt.name {
					t.Errorf("Open(%s).Repo = %q, want %q", where, s.Repo, tt.name)
				}
				s.Close()
			}
			sub := filepath.Join(f.dir, "sub")
			s, err := Open(ctx, sub, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := RepoName(sub); s.Repo != "sub" || got != "sub" {
				t.Errorf("subdirectory: Open.Repo = %q, RepoName = %q, want sub", s.Repo, got)
			}
		})
	}
}
