package xrepo

import (
	"fmt"
	"testing"

	"codectx/pkg/codectx"
)

// synthRepos makes n Go repositories of files files each; every file
// imports two packages of its own module, two of the next repository's
// and the standard library.
func synthRepos(n, files int) []Repo {
	repos := make([]Repo, n)
	for r := range repos {
		mod := fmt.Sprintf("github.com/acme/r%d", r)
		next := fmt.Sprintf("github.com/acme/r%d", (r+1)%n)
		repo := Repo{Name: fmt.Sprintf("r%d", r), Manifests: map[string][]byte{"go.mod": []byte("module " + mod + "\n")}}
		for f := 0; f < files; f++ {
			repo.Files = append(repo.Files, File{
				Path: fmt.Sprintf("p%d/f%d.go", f%20, f), Language: codectx.Go, Module: fmt.Sprintf("p%d", f%20),
				Imports: []string{"fmt", "strings", fmt.Sprintf("%s/p%d", mod, (f+1)%20), fmt.Sprintf("%s/p%d", mod, (f+2)%20),
					fmt.Sprintf("%s/p%d", next, f%20), fmt.Sprintf("%s/p%d", next, (f+7)%20)},
			})
		}
		repos[r] = repo
	}
	return repos
}

// BenchmarkBuild: the graph of 10 and 100 repositories of 200 Go files.
func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{10, 100} {
		repos := synthRepos(n, 200)
		b.Run(fmt.Sprintf("repos=%d", n), func(b *testing.B) {
			var links int
			for b.Loop() {
				links = Build(repos).Len()
			}
			b.ReportMetric(float64(links), "links")
		})
	}
}
