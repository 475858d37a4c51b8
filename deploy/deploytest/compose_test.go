package deploytest

import (
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// composeFile is the part of the compose specification the checks read.
type composeFile struct {
	Services map[string]service `yaml:"services"`
	Volumes  map[string]any     `yaml:"volumes"`
}

type service struct {
	Image       string       `yaml:"image"`
	Build       any          `yaml:"build"`
	Command     stringList   `yaml:"command"`
	Environment envMap       `yaml:"environment"`
	DependsOn   dependsOn    `yaml:"depends_on"`
	Healthcheck *healthcheck `yaml:"healthcheck"`
	Ports       []portSpec   `yaml:"ports"`
	Volumes     []volumeSpec `yaml:"volumes"`
	Profiles    []string     `yaml:"profiles"`
}

type healthcheck struct {
	Test    stringList `yaml:"test"`
	Disable bool       `yaml:"disable"`
}

// stringList is a compose field that is either a string or a list.
type stringList []string

func (l *stringList) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*l = strings.Fields(n.Value)
		return nil
	case yaml.SequenceNode:
		var s []string
		if err := n.Decode(&s); err != nil {
			return err
		}
		*l = s
		return nil
	}
	return fmt.Errorf("line %d: want a string or a list", n.Line)
}

// envMap is `environment:` as a mapping or as a list of KEY=VALUE.
type envMap map[string]string

func (e *envMap) UnmarshalYAML(n *yaml.Node) error {
	out := envMap{}
	switch n.Kind {
	case yaml.MappingNode:
		var m map[string]*string
		if err := n.Decode(&m); err != nil {
			return err
		}
		for k, v := range m {
			if v != nil {
				out[k] = *v
			} else {
				out[k] = ""
			}
		}
	case yaml.SequenceNode:
		var s []string
		if err := n.Decode(&s); err != nil {
			return err
		}
		for _, kv := range s {
			k, v, _ := strings.Cut(kv, "=")
			out[k] = v
		}
	default:
		return fmt.Errorf("line %d: environment: want a mapping or a list", n.Line)
	}
	*e = out
	return nil
}

// dependsOn maps a dependency to its condition; the list form means
// service_started.
type dependsOn map[string]string

func (d *dependsOn) UnmarshalYAML(n *yaml.Node) error {
	out := dependsOn{}
	switch n.Kind {
	case yaml.SequenceNode:
		var s []string
		if err := n.Decode(&s); err != nil {
			return err
		}
		for _, name := range s {
			out[name] = "service_started"
		}
	case yaml.MappingNode:
		var m map[string]struct {
			Condition string `yaml:"condition"`
		}
		if err := n.Decode(&m); err != nil {
			return err
		}
		for name, v := range m {
			c := v.Condition
			if c == "" {
				c = "service_started"
			}
			out[name] = c
		}
	default:
		return fmt.Errorf("line %d: depends_on: want a list or a mapping", n.Line)
	}
	*d = out
	return nil
}

// portSpec is one entry of `ports:`, short ("[ip:]host:container[/proto]")
// or long syntax.
type portSpec struct {
	HostIP    string
	Published string // empty: not published on the host
	Target    string
	Protocol  string
}

func (p *portSpec) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		s := n.Value
		p.Protocol = "tcp"
		if i := strings.LastIndex(s, "/"); i >= 0 {
			s, p.Protocol = s[:i], s[i+1:]
		}
		parts := splitColons(s)
		switch len(parts) {
		case 1:
			p.Target = parts[0]
		case 2:
			p.Published, p.Target = parts[0], parts[1]
		case 3:
			p.HostIP, p.Published, p.Target = parts[0], parts[1], parts[2]
		default:
			return fmt.Errorf("line %d: port %q: cannot parse", n.Line, n.Value)
		}
		return nil
	case yaml.MappingNode:
		var m struct {
			HostIP    string `yaml:"host_ip"`
			Published string `yaml:"published"`
			Target    string `yaml:"target"`
			Protocol  string `yaml:"protocol"`
		}
		if err := n.Decode(&m); err != nil {
			return err
		}
		*p = portSpec{HostIP: m.HostIP, Published: m.Published, Target: m.Target, Protocol: m.Protocol}
		if p.Protocol == "" {
			p.Protocol = "tcp"
		}
		return nil
	}
	return fmt.Errorf("line %d: port: want a string or a mapping", n.Line)
}

// volumeSpec is one entry of a service's `volumes:`; Source is a named
// volume, a host path or empty (anonymous).
type volumeSpec struct {
	Source string
	Target string
}

func (v *volumeSpec) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		parts := splitColons(n.Value)
		if len(parts) == 1 {
			v.Target = parts[0]
		} else {
			v.Source, v.Target = parts[0], parts[1]
		}
		return nil
	case yaml.MappingNode:
		var m struct {
			Source string `yaml:"source"`
			Target string `yaml:"target"`
		}
		if err := n.Decode(&m); err != nil {
			return err
		}
		v.Source, v.Target = m.Source, m.Target
		return nil
	}
	return fmt.Errorf("line %d: volume: want a string or a mapping", n.Line)
}

// splitColons splits a short-syntax entry on ':' outside ${...}
// interpolations (whose defaults, ${X:-y}, hold a colon themselves).
func splitColons(s string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "${"):
			depth++
			i++
		case s[i] == '}' && depth > 0:
			depth--
		case s[i] == ':' && depth == 0:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

func (v volumeSpec) named() bool {
	return v.Source != "" && !strings.HasPrefix(v.Source, ".") &&
		!strings.HasPrefix(v.Source, "/") && !strings.HasPrefix(v.Source, "~") &&
		!strings.HasPrefix(v.Source, "$")
}

// infra kinds, found by image so the service names are free.
var infraImages = []struct{ kind, prefix string }{
	{"temporal", "temporalio/auto-setup:"},
	{"temporal", "temporalio/server:"},
	{"nats", "nats:"},
	{"minio", "minio/minio:"},
	{"qdrant", "qdrant/qdrant:"},
	{"database", "postgres:"},
	{"database", "mysql:"},
}

func infraKind(image string) string {
	// A leading registry host ("host.name/..." or "host:port/...") does
	// not change what the image runs.
	if first, rest, ok := strings.Cut(image, "/"); ok && strings.ContainsAny(first, ".:") {
		image = rest
	}
	for _, ii := range infraImages {
		if strings.HasPrefix(image, ii.prefix) {
			return ii.kind
		}
	}
	return ""
}

// checkCompose returns every problem found in a docker-compose document.
func checkCompose(doc []byte) []error {
	var f composeFile
	if err := yaml.Unmarshal(doc, &f); err != nil {
		return []error{fmt.Errorf("parse compose: %w", err)}
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	names := make([]string, 0, len(f.Services))
	for name := range f.Services {
		names = append(names, name)
	}
	sort.Strings(names)

	// Infrastructure: one service of each kind, each with a healthcheck.
	infra := map[string]string{} // kind -> service name
	for _, name := range names {
		if k := infraKind(f.Services[name].Image); k != "" {
			if prev, ok := infra[k]; ok {
				bad("infra %s: two services, %s and %s", k, prev, name)
			}
			infra[k] = name
		}
	}
	for _, kind := range []string{"temporal", "database", "nats", "minio", "qdrant"} {
		name, ok := infra[kind]
		if !ok {
			bad("infra %s: no service runs it", kind)
			continue
		}
		if !hasHealthcheck(f.Services[name]) {
			bad("infra %s: service %s has no healthcheck", kind, name)
		}
		if kind != "temporal" && !hasNamedVolume(f.Services[name]) {
			bad("infra %s: service %s keeps its state in no named volume", kind, name)
		}
	}
	if t, ok := infra["temporal"]; ok {
		env := f.Services[t].Environment
		if db, ok := infra["database"]; ok && env["POSTGRES_SEEDS"] != db && env["MYSQL_SEEDS"] != db {
			bad("infra temporal: %s does not point its seeds at the database service %s", t, db)
		}
		if _, ok := f.Services[t].DependsOn[infra["database"]]; !ok {
			bad("infra temporal: %s does not depend on the database", t)
		}
	}
	if nats, ok := infra["nats"]; ok {
		cmd := strings.Join(f.Services[nats].Command, " ")
		if !strings.Contains(cmd, "-js") || !strings.Contains(cmd, "-sd") {
			bad("infra nats: command %q does not enable JetStream with a store dir (-js -sd)", cmd)
		}
	}

	// Every codectx role, built from deploy/Dockerfile, with its command,
	// env pointing at the infra services and healthy dependencies.
	for _, role := range roles {
		s, ok := f.Services[role]
		if !ok {
			bad("role %s: no service", role)
			continue
		}
		if len(s.Command) != 1 || s.Command[0] != role {
			bad("role %s: command %q, want [%s]", role, s.Command, role)
		}
		if len(s.Profiles) > 0 {
			bad("role %s: behind profiles %v, so a plain `up` does not start it", role, s.Profiles)
		}
		checkBuild(role, s, bad)
		for _, k := range requiredEnv {
			if v, ok := s.Environment[k]; !ok || v == "" {
				bad("role %s: env %s missing", role, k)
			}
		}
		checkEndpoints(role, s.Environment, f, infra, bad)
		if s.Environment["CODECTX_API_KEYS_FILE"] == "" {
			bad("role %s: API keys off (no CODECTX_API_KEYS_FILE)", role)
		}
		if !mounts(s, "/repos") {
			bad("role %s: no directory mounted at /repos for local repositories", role)
		}
		for _, kind := range []string{"temporal", "nats", "minio", "qdrant"} {
			dep, ok := infra[kind]
			if !ok {
				continue
			}
			if c, ok := s.DependsOn[dep]; !ok || c != "service_healthy" {
				bad("role %s: does not wait for %s to be healthy (depends_on %s: %q)", role, kind, dep, c)
			}
		}
	}
	if up, ok := f.Services["codectx-up"]; ok {
		if len(up.Command) != 1 || up.Command[0] != "up" {
			bad("role up: command %q, want [up]", up.Command)
		}
		checkBuild("up", up, bad)
		if up.Environment["CODECTX_KEYS"] != "true" {
			bad("role up: API keys off (CODECTX_KEYS=%q, want true)", up.Environment["CODECTX_KEYS"])
		}
		if !mounts(up, "/repos") {
			bad("role up: no directory mounted at /repos for local repositories")
		}
	}

	// Published host ports on the two entry points.
	wantPublished := map[string]string{"query-service": "7700", "gateway": "7701"}
	for role, port := range wantPublished {
		s, ok := f.Services[role]
		if !ok {
			continue
		}
		_, listen, _ := net.SplitHostPort(s.Environment["CODECTX_LISTEN"])
		found := false
		for _, p := range s.Ports {
			if p.Published == port {
				found = true
				if p.Target != listen {
					bad("role %s: publishes %s to container port %s, but it listens on %s", role, port, p.Target, listen)
				}
			}
		}
		if !found {
			bad("role %s: not published on host port %s", role, port)
		}
	}

	// Graph-wide rules.
	published := map[string]string{} // ip/port/proto -> service
	for _, name := range names {
		s := f.Services[name]
		for dep, cond := range s.DependsOn {
			d, ok := f.Services[dep]
			if !ok {
				bad("service %s: depends_on %s, which is not a service", name, dep)
				continue
			}
			if cond == "service_healthy" && !hasHealthcheck(d) {
				bad("service %s: waits for %s to be healthy, but %s has no healthcheck", name, dep, dep)
			}
		}
		if s.Image == "" && s.Build == nil {
			bad("service %s: neither image nor build", name)
		}
		if s.Image != "" {
			if err := checkPinned(s.Image); err != nil {
				bad("service %s: %v", name, err)
			}
		}
		for _, v := range s.Volumes {
			if v.named() {
				if _, ok := f.Volumes[v.Source]; !ok {
					bad("service %s: volume %s is not declared under volumes:", name, v.Source)
				}
			}
		}
		for _, p := range s.Ports {
			if p.Published == "" {
				continue
			}
			if _, err := strconv.Atoi(p.Published); err != nil {
				bad("service %s: published port %q is not a number", name, p.Published)
			}
			ip := p.HostIP
			if ip == "" {
				ip = "0.0.0.0"
			}
			if ip != "127.0.0.1" {
				bad("service %s: host port %s published on %s, want 127.0.0.1 (loopback) by default", name, p.Published, ip)
			}
			if s.Build == nil && len(s.Profiles) == 0 {
				// Any local user reaches a loopback port, and a console
				// (Temporal UI, MinIO's) has none of codectx's API keys:
				// it would show every tenant's data to them.
				bad("service %s: publishes host port %s on a plain `up`; only codectx's roles may (put a console behind a profile)", name, p.Published)
			}
			key := ip + "/" + p.Published + "/" + p.Protocol
			if prev, ok := published[key]; ok {
				bad("service %s: host port %s already published by %s", name, key, prev)
			}
			published[key] = name
		}
	}
	return errs
}

// mounts reports whether s mounts a volume or host directory at target.
func mounts(s service, target string) bool {
	for _, v := range s.Volumes {
		if v.Target == target && v.Source != "" {
			return true
		}
	}
	return false
}

func hasHealthcheck(s service) bool {
	return s.Healthcheck != nil && !s.Healthcheck.Disable && len(s.Healthcheck.Test) > 0 &&
		s.Healthcheck.Test[0] != "NONE"
}

func hasNamedVolume(s service) bool {
	for _, v := range s.Volumes {
		if v.named() {
			return true
		}
	}
	return false
}

func checkBuild(role string, s service, bad func(string, ...any)) {
	b, ok := s.Build.(map[string]any)
	if !ok {
		bad("role %s: build is not a mapping with context and dockerfile", role)
		return
	}
	if b["dockerfile"] != "deploy/Dockerfile" {
		bad("role %s: build.dockerfile = %v, want deploy/Dockerfile", role, b["dockerfile"])
	}
	if b["context"] != "." {
		bad("role %s: build.context = %v, want . (the repository root)", role, b["context"])
	}
}

// checkEndpoints checks that the role's endpoints name the infra services.
func checkEndpoints(role string, env envMap, f composeFile, infra map[string]string, bad func(string, ...any)) {
	hostIs := func(key, hostport, kind, port string) {
		if hostport == "" {
			return // reported as missing
		}
		h, p, err := net.SplitHostPort(hostport)
		if err != nil {
			bad("role %s: %s=%q: %v", role, key, hostport, err)
			return
		}
		if want, ok := infra[kind]; ok && h != want {
			bad("role %s: %s host %q is not the %s service %q", role, key, h, kind, want)
		}
		if p != port {
			bad("role %s: %s port %s, want %s", role, key, p, port)
		}
	}
	hostIs("CODECTX_TEMPORAL", env["CODECTX_TEMPORAL"], "temporal", "7233")
	hostIs("CODECTX_S3_ENDPOINT", env["CODECTX_S3_ENDPOINT"], "minio", "9000")
	hostIs("CODECTX_QDRANT", env["CODECTX_QDRANT"], "qdrant", "6334")
	if raw := env["CODECTX_NATS"]; raw != "" {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme != "nats" {
			bad("role %s: CODECTX_NATS=%q is not a nats:// URL", role, raw)
		} else {
			hostIs("CODECTX_NATS", u.Host, "nats", "4222")
		}
	}
	if s := env["CODECTX_S3_SECURE"]; s != "" && s != "true" && s != "false" {
		bad("role %s: CODECTX_S3_SECURE=%q, want true or false", role, s)
	}
	if m, ok := infra["minio"]; ok {
		me := f.Services[m].Environment
		if env["CODECTX_S3_ACCESS_KEY"] != me["MINIO_ROOT_USER"] || env["CODECTX_S3_SECRET_KEY"] != me["MINIO_ROOT_PASSWORD"] {
			bad("role %s: S3 credentials differ from the %s root user", role, m)
		}
	}
}

// checkPinned rejects untagged and :latest images.
func checkPinned(image string) error {
	if strings.Contains(image, "@sha256:") {
		return nil
	}
	ref := image[strings.LastIndex(image, "/")+1:]
	_, tag, ok := strings.Cut(ref, ":")
	switch {
	case !ok || tag == "":
		return fmt.Errorf("image %s has no tag", image)
	case tag == "latest" || strings.HasSuffix(tag, "-latest"):
		return fmt.Errorf("image %s is not pinned (latest)", image)
	}
	return nil
}

func TestComposeFile(t *testing.T) {
	wantNoErrs(t, checkCompose(readRepoFile(t, "docker-compose.yml")))
}

func TestComposeFileMentionsHowToRun(t *testing.T) {
	doc := string(readRepoFile(t, "docker-compose.yml"))
	if !strings.HasPrefix(doc, "#") || !strings.Contains(doc, "docker compose up --build") {
		t.Error("docker-compose.yml: no header comment with `docker compose up --build`")
	}
}

// TestComposeCheckCatchesBreakage breaks the real file one way at a time
// and feeds it to the same checker.
func TestComposeCheckCatchesBreakage(t *testing.T) {
	orig := string(readRepoFile(t, "docker-compose.yml"))
	tests := []struct {
		name, old, new, want string
	}{
		{"wrong command", `command: ["gateway"]`, `command: ["gatewy"]`, `role gateway: command`},
		{"role missing", "  graph-worker:\n    <<: *codectx", "  graph-wrk:\n    <<: *codectx", "role graph-worker: no service"},
		{"latest tag", "image: qdrant/qdrant:v", "image: qdrant/qdrant:latest #", "not pinned"},
		{"untagged", "image: nats:2.11.4-alpine", "image: nats", "has no tag"},
		{"port collision", `"127.0.0.1:7701:7700"`, `"127.0.0.1:8233:7700"`, "already published"},
		{"console on a plain up", "    profiles: [\"consoles\"]\n", "", "service temporal-ui: publishes host port 8233 on a plain `up`"},
		{"storage console published", "      - minio-data:/data\n", "      - minio-data:/data\n    ports:\n      - \"127.0.0.1:9001:9001\"\n", "service minio: publishes host port 9001"},
		{"gateway port", `"127.0.0.1:7701:7700"`, `"127.0.0.1:7702:7700"`, "gateway: not published on host port 7701"},
		{"dangling depends_on", "postgresql:\n        condition", "postgres-db:\n        condition", "depends_on postgres-db, which is not a service"},
		{"no infra healthcheck", `test: ["CMD", "mc", "ready", "local"]`, `disable: true`, "service minio has no healthcheck"},
		{"env missing", "    CODECTX_NATS: nats://nats:4222\n", "", "env CODECTX_NATS missing"},
		{"env wrong host", "CODECTX_TEMPORAL: temporal:7233", "CODECTX_TEMPORAL: temporl:7233", `host "temporl" is not the temporal service`},
		{"not healthy", "    nats:\n      condition: service_healthy", "    nats:\n      condition: service_started", "does not wait for nats"},
		{"qdrant gone", "image: qdrant/qdrant:v1.13.4", "image: example/vectors:v1", "infra qdrant: no service"},
		{"no jetstream", `command: ["-js", "-sd", "/data", "-m", "8222"]`, `command: ["-m", "8222"]`, "JetStream"},
		{"undeclared volume", "      - nats-data:/data", "      - nats-store:/data", "volume nats-store is not declared"},
		{"wrong dockerfile", "dockerfile: deploy/Dockerfile", "dockerfile: Dockerfile", "build.dockerfile"},
		{"secret mismatch", "CODECTX_S3_SECRET_KEY: ${MINIO_ROOT_PASSWORD:-codectx-dev-secret}", "CODECTX_S3_SECRET_KEY: other", "S3 credentials differ"},
		{"not yaml", "services:", "services: [", "parse compose"},
		{"all interfaces", `"127.0.0.1:8233:8080"`, `"8233:8080"`, "published on 0.0.0.0, want 127.0.0.1"},
		{"keys off", "    CODECTX_API_KEYS_FILE: /keys/keys.json\n", "", "role gateway: API keys off"},
		{"up keys off", `CODECTX_KEYS: "true"`, `CODECTX_KEYS: "false"`, "role up: API keys off"},
		{"no repos mount", "    - ${CODECTX_REPOS:-./repos}:/repos:ro\n    - ${CODECTX_KEYS_DIR", "    - ${CODECTX_KEYS_DIR", "role orchestrator: no directory mounted at /repos"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := mustReplace(t, orig, tt.old, tt.new)
			wantErrContaining(t, checkCompose([]byte(doc)), tt.want)
		})
	}
}

// TestComposeCheckOtherSyntax feeds a small hand-written document in the
// list forms of environment, depends_on and ports.
func TestComposeCheckOtherSyntax(t *testing.T) {
	doc := `
services:
  db:
    image: postgres:16.4
  orchestrator:
    image: codectx
    command: orchestrator
    environment:
      - CODECTX_DATA=/data
    depends_on:
      - db
      - ghost
    ports:
      - "127.0.0.1:7700:7700/tcp"
      - target: 7700
        published: "7700"
        host_ip: 127.0.0.1
`
	errs := checkCompose([]byte(doc))
	for _, want := range []string{
		"infra temporal: no service",
		"infra database: service db has no healthcheck",
		"role orchestrator: env CODECTX_NATS missing",
		"role orchestrator: build is not a mapping",
		"image codectx has no tag",
		"depends_on ghost, which is not a service",
		"host port 127.0.0.1/7700/tcp already published",
		"role gateway: no service",
	} {
		wantErrContaining(t, errs, want)
	}
}

func TestCheckPinned(t *testing.T) {
	tests := []struct {
		image string
		ok    bool
	}{
		{"nats:2.11.4-alpine", true},
		{"registry.example.com:5000/team/img:1.2", true},
		{"minio/minio@sha256:0123abcd", true},
		{"registry.example.com:5000/team/img", false},
		{"qdrant/qdrant", false},
		{"postgres:latest", false},
		{"temporalio/ui:", false},
	}
	for _, tt := range tests {
		if got := checkPinned(tt.image) == nil; got != tt.ok {
			t.Errorf("checkPinned(%q) ok = %v, want %v", tt.image, got, tt.ok)
		}
	}
}

// TestComposeTemporalMatchesEmbedded: the compose Temporal server (and the
// admin tools that set up its schema) are the version codectx up embeds,
// so the schema and the behaviour tested in-process are the ones deployed.
func TestComposeTemporalMatchesEmbedded(t *testing.T) {
	var want string
	for _, line := range strings.Split(string(readRepoFile(t, "go.mod")), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "go.temporal.io/server" {
			want = strings.TrimPrefix(f[1], "v")
		}
	}
	if want == "" {
		t.Fatal("go.mod does not require go.temporal.io/server")
	}
	var f composeFile
	if err := yaml.Unmarshal(readRepoFile(t, "docker-compose.yml"), &f); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for name, s := range f.Services {
		for _, repo := range []string{"temporalio/server:", "temporalio/auto-setup:", "temporalio/admin-tools:"} {
			if tag, ok := strings.CutPrefix(s.Image, repo); ok {
				seen++
				if tag != want {
					t.Errorf("service %s runs %s, want tag %s (go.mod's go.temporal.io/server)", name, s.Image, want)
				}
			}
		}
	}
	if seen == 0 {
		t.Error("no Temporal server image in docker-compose.yml")
	}
}

// The compose query-service maps the object store's shards from a bounded
// local cache, and keeps the shared environment it merges.
func TestComposeShardCache(t *testing.T) {
	var f composeFile
	if err := yaml.Unmarshal(readRepoFile(t, "docker-compose.yml"), &f); err != nil {
		t.Fatal(err)
	}
	env := f.Services["query-service"].Environment
	if env["CODECTX_SHARD_CACHE"] == "" || env["CODECTX_SHARD_CACHE_BYTES"] == "" {
		t.Errorf("query-service: no shard cache in %v", env)
	}
	if env["CODECTX_S3_ENDPOINT"] == "" || env["CODECTX_TEMPORAL"] == "" {
		t.Errorf("query-service lost the shared environment: %v", env)
	}
	if f.Services["gateway"].Environment["CODECTX_SHARD_CACHE"] != "" {
		t.Error("gateway has a shard cache")
	}
}
