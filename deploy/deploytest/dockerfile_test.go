package deploytest

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction with continuations joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, ...
	args string
}

type stage struct {
	name, base string
	ins        []instruction
}

var argRef = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

// parseDockerfile splits a Dockerfile into stages; ARGs declared before the
// first FROM are substituted into the FROM lines with their defaults.
func parseDockerfile(text string) (global []instruction, stages []stage) {
	var lines []string
	var cur strings.Builder
	for _, l := range strings.Split(text, "\n") {
		t := strings.TrimSpace(l)
		if cur.Len() == 0 && (t == "" || strings.HasPrefix(t, "#")) {
			continue
		}
		if strings.HasPrefix(t, "#") {
			continue // comment inside a continued instruction
		}
		if strings.HasSuffix(t, "\\") {
			cur.WriteString(strings.TrimSuffix(t, "\\") + " ")
			continue
		}
		cur.WriteString(t)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	if cur.Len() > 0 {
		lines = append(lines, cur.String())
	}
	args := map[string]string{}
	for _, l := range lines {
		cmd, rest, _ := strings.Cut(l, " ")
		in := instruction{strings.ToUpper(cmd), strings.TrimSpace(rest)}
		if in.cmd == "FROM" {
			from := argRef.ReplaceAllStringFunc(in.args, func(m string) string {
				return args[argRef.FindStringSubmatch(m)[1]]
			})
			f := strings.Fields(from)
			s := stage{}
			if len(f) > 0 {
				s.base = f[0]
			}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			if in.cmd == "ARG" {
				k, v, _ := strings.Cut(in.args, "=")
				args[k] = v
			}
			global = append(global, in)
			continue
		}
		last := &stages[len(stages)-1]
		last.ins = append(last.ins, in)
	}
	return global, stages
}

// checkDockerfile returns every problem found in deploy/Dockerfile.
func checkDockerfile(text string) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	_, stages := parseDockerfile(text)
	if len(stages) < 2 {
		return []error{fmt.Errorf("want a builder and a runtime stage, got %d stages", len(stages))}
	}
	builder, runtime := stages[0], stages[len(stages)-1]
	if builder.name == "" {
		bad("first stage has no name (FROM ... AS builder)")
	}
	if !regexp.MustCompile(`^golang:1\.26(\.\d+)?-bookworm$`).MatchString(builder.base) {
		bad("builder stage FROM %q, want golang:1.26-bookworm", builder.base)
	}
	if runtime.base != "debian:bookworm-slim" {
		bad("runtime stage FROM %q, want debian:bookworm-slim", runtime.base)
	}

	// Builder: module download cached before the sources are copied.
	download, copyAll, build := -1, -1, -1
	for i, in := range builder.ins {
		switch {
		case in.cmd == "COPY" && strings.Contains(in.args, "go.mod") && download < 0 && copyAll < 0:
			if !strings.Contains(in.args, "go.sum") {
				bad("builder: go.mod copied without go.sum")
			}
		case in.cmd == "RUN" && strings.Contains(in.args, "go mod download"):
			download = i
		case in.cmd == "COPY" && strings.HasPrefix(in.args, ". "):
			copyAll = i
		case in.cmd == "RUN" && strings.Contains(in.args, "go build"):
			build = i
			for _, want := range []string{"CGO_ENABLED=1", "-trimpath", `-ldflags "-s -w"`, "./services/codectx"} {
				if !strings.Contains(in.args, want) {
					bad("builder: go build without %s", want)
				}
			}
		}
	}
	switch {
	case download < 0:
		bad("builder: no RUN go mod download")
	case copyAll < 0:
		bad("builder: sources never copied (COPY . .)")
	case download > copyAll:
		bad("builder: go mod download runs after COPY . ., so any source change redownloads modules")
	}
	if build < 0 {
		bad("builder: no go build")
	} else if build < copyAll {
		bad("builder: go build before the sources are copied")
	}

	// Runtime: packages, the binary, a non-root user, the entrypoint.
	var user, entrypoint string
	copied, pkgs := false, ""
	for _, in := range runtime.ins {
		switch in.cmd {
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			entrypoint = in.args
		case "COPY":
			if strings.Contains(in.args, "--from="+builder.name) && builder.name != "" {
				copied = true
			}
		case "RUN":
			if strings.Contains(in.args, "apt-get install") {
				pkgs += in.args
			}
		}
	}
	for _, p := range []string{"ca-certificates", "git"} {
		if !regexp.MustCompile(`\b` + p + `\b`).MatchString(pkgs) {
			bad("runtime: %s not installed", p)
		}
	}
	if !copied {
		bad("runtime: binary not copied from the builder stage")
	}
	name, _, _ := strings.Cut(user, ":")
	switch name {
	case "":
		bad("runtime: no USER, so the container runs as root")
	case "root", "0":
		bad("runtime: USER %s is root", user)
	}
	if entrypoint != `["codectx"]` {
		bad("runtime: ENTRYPOINT %s, want [\"codectx\"]", entrypoint)
	}
	return errs
}

func TestDockerfile(t *testing.T) {
	wantNoErrs(t, checkDockerfile(string(readRepoFile(t, "deploy/Dockerfile"))))
}

func TestDockerfileCheckCatchesBreakage(t *testing.T) {
	orig := string(readRepoFile(t, "deploy/Dockerfile"))
	tests := []struct{ name, old, new, want string }{
		{"root user", "USER 10001:10001", "USER root", "is root"},
		{"no user", "USER 10001:10001\n", "", "no USER"},
		{"wrong package", "./services/codectx", "./cmd/codectx", "without ./services/codectx"},
		{"no cgo", "CGO_ENABLED=1", "CGO_ENABLED=0", "without CGO_ENABLED=1"},
		{"download after copy", "RUN go mod download && go mod verify\nCOPY . .", "COPY . .\nRUN go mod download && go mod verify", "after COPY . ."},
		{"alpine runtime", "FROM debian:${DEBIAN_RELEASE}-slim AS runtime", "FROM alpine:3.20 AS runtime", "runtime stage FROM"},
		{"single stage", "FROM debian:${DEBIAN_RELEASE}-slim AS runtime", "", "want a builder and a runtime stage"},
		{"no git", "ca-certificates git", "ca-certificates", "git not installed"},
		{"shell entrypoint", `ENTRYPOINT ["codectx"]`, "ENTRYPOINT codectx", "ENTRYPOINT"},
		{"old go", "ARG GO_VERSION=1.26", "ARG GO_VERSION=1.22", "want golang:1.26-bookworm"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantErrContaining(t, checkDockerfile(mustReplace(t, orig, tt.old, tt.new)), tt.want)
		})
	}
}

func TestDockerignore(t *testing.T) {
	lines := map[string]bool{}
	for _, l := range strings.Split(string(readRepoFile(t, ".dockerignore")), "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	for _, want := range []string{".git", ".codectx", ".cache", "bin"} {
		if !lines[want] {
			t.Errorf(".dockerignore: %s not excluded", want)
		}
	}
	for _, keep := range []string{"go.mod", "go.sum", "services", "pkg", "*", "**", "deploy"} {
		if lines[keep] {
			t.Errorf(".dockerignore: excludes %s, which the build needs", keep)
		}
	}
}
