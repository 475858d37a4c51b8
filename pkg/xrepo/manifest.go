package xrepo

import (
	"encoding/json"
	"encoding/xml"
	"path"
	"regexp"
	"strings"
)

// Manifest file names the resolver reads, by ecosystem.
var manifestNames = map[string]string{
	"go.mod":         Go,
	"package.json":   NPM,
	"pyproject.toml": Python,
	"setup.cfg":      Python,
	"setup.py":       Python,
	"pom.xml":        Maven,
	"Cargo.toml":     Cargo,
}

// IsManifest reports whether p names a package manifest the resolver
// reads (go.mod, package.json, pyproject.toml, setup.cfg, setup.py,
// pom.xml, Cargo.toml). Manifests under vendor/, node_modules/ or
// third_party/ are someone else's, and those under testdata/, fixtures
// or a directory Go ignores (".x", "_x") are not what the repository
// publishes: they do not count.
func IsManifest(p string) bool {
	if _, ok := manifestNames[path.Base(p)]; !ok {
		return false
	}
	els := strings.Split(p, "/")
	for _, el := range els[:len(els)-1] {
		switch el {
		case "node_modules", "vendor", "third_party", "testdata", "fixtures", "__fixtures__", "__tests__":
			return false
		}
		if strings.HasPrefix(el, ".") || strings.HasPrefix(el, "_") {
			return false
		}
	}
	return true
}

func jsonUnmarshal(data []byte, v any) bool { return json.Unmarshal(data, v) == nil }

// goModulePath is the module path of a go.mod.
func goModulePath(data []byte) string {
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "module"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			if i := strings.Index(rest, "//"); i >= 0 {
				rest = rest[:i]
			}
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// npmManifest is what the resolver reads of a package.json.
type npmManifest struct {
	Name    string          `json:"name"`
	Main    string          `json:"main"`
	Module  string          `json:"module"`
	Types   string          `json:"types"`
	Typings string          `json:"typings"`
	Exports json.RawMessage `json:"exports"`
	Source  string          `json:"source"`
}

// exportsMap turns a package.json "exports" into subpath -> targets: "."
// for the package itself, "./x" for a subpath, "./*" for a pattern. Each
// target list is in condition order (types, import, module, default,
// require, node, browser, then the rest), every string found.
func exportsMap(raw json.RawMessage) map[string][]string {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	out := map[string][]string{}
	if m, ok := v.(map[string]any); ok {
		subpaths := false
		for k := range m {
			if strings.HasPrefix(k, ".") {
				subpaths = true
				break
			}
		}
		if subpaths {
			for k, t := range m {
				if strings.HasPrefix(k, ".") {
					out[k] = targets(t, 0)
				}
			}
			return out
		}
	}
	out["."] = targets(v, 0)
	return out
}

var conditionOrder = []string{"source", "types", "typings", "import", "module", "default", "require", "node", "browser"}

func targets(v any, depth int) []string {
	if depth > 8 {
		return nil
	}
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			out = append(out, targets(x, depth+1)...)
		}
		return out
	case map[string]any:
		var out []string
		seen := map[string]bool{}
		for _, c := range conditionOrder {
			if x, ok := t[c]; ok {
				seen[c] = true
				out = append(out, targets(x, depth+1)...)
			}
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			if !seen[k] {
				keys = append(keys, k)
			}
		}
		sortStrings(keys)
		for _, k := range keys {
			out = append(out, targets(t[k], depth+1)...)
		}
		return out
	}
	return nil
}

// tomlValues reads `key = "value"` pairs of a TOML file by section
// ("package.name", "project.name", "tool.poetry.name", "lib.name"). It
// reads only what the resolver needs: basic or literal strings on one
// line, [section] headers; the rest is ignored.
func tomlValues(data []byte) map[string]string {
	out := map[string]string{}
	section := ""
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if strings.HasPrefix(line, "[") {
			section = strings.TrimSpace(strings.Trim(line, "[]"))
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if len(v) < 2 || (v[0] != '"' && v[0] != '\'') {
			continue
		}
		end := strings.IndexByte(v[1:], v[0])
		if end < 0 {
			continue
		}
		key := k
		if section != "" {
			key = section + "." + k
		}
		if _, dup := out[key]; !dup {
			out[key] = v[1 : 1+end]
		}
	}
	return out
}

// iniValues reads `key = value` of setup.cfg by section ("metadata.name").
func iniValues(data []byte) map[string]string {
	out := map[string]string{}
	section := ""
	for _, line := range strings.Split(string(data), "\n") {
		t := strings.TrimSpace(line)
		if t == "" || t[0] == '#' || t[0] == ';' {
			continue
		}
		if strings.HasPrefix(t, "[") {
			section = strings.TrimSpace(strings.Trim(t, "[]"))
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			continue // a continuation line
		}
		k, v, ok := strings.Cut(t, "=")
		if !ok {
			continue
		}
		out[section+"."+strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out
}

var setupPyName = regexp.MustCompile(`\bname\s*=\s*["']([A-Za-z0-9][A-Za-z0-9._-]*)["']`)

// pythonDistribution is the distribution name a Python manifest declares.
func pythonDistribution(base string, data []byte) string {
	switch base {
	case "pyproject.toml":
		v := tomlValues(data)
		if n := v["project.name"]; n != "" {
			return n
		}
		return v["tool.poetry.name"]
	case "setup.cfg":
		return iniValues(data)["metadata.name"]
	case "setup.py":
		if m := setupPyName.FindSubmatch(data); m != nil {
			return string(m[1])
		}
	}
	return ""
}

// pomCoordinates is groupId:artifactId of a pom.xml (the parent's group
// when the module names none).
func pomCoordinates(data []byte) string {
	var p struct {
		GroupID    string `xml:"groupId"`
		ArtifactID string `xml:"artifactId"`
		Parent     struct {
			GroupID string `xml:"groupId"`
		} `xml:"parent"`
	}
	if xml.Unmarshal(data, &p) != nil {
		return ""
	}
	g := strings.TrimSpace(p.GroupID)
	if g == "" {
		g = strings.TrimSpace(p.Parent.GroupID)
	}
	a := strings.TrimSpace(p.ArtifactID)
	if g == "" || a == "" {
		return ""
	}
	return g + ":" + a
}

// cargoCrate is the crate a Cargo.toml declares: its package name, the
// name code imports it by ([lib] name, else the package name with '-' as
// '_') and the library's root file relative to the manifest.
func cargoCrate(data []byte) (pkg, ident, root string) {
	v := tomlValues(data)
	pkg = v["package.name"]
	if pkg == "" {
		return "", "", ""
	}
	ident = v["lib.name"]
	if ident == "" {
		ident = pkg
	}
	ident = strings.ReplaceAll(ident, "-", "_")
	root = v["lib.path"]
	if root == "" {
		root = "src/lib.rs"
	}
	return pkg, ident, root
}

// normalizeDist is a Python distribution name as an import name would
// spell it: "Acme-Money" -> "acme_money" (PEP 503 normalisation, '_').
func normalizeDist(n string) string {
	n = strings.ToLower(n)
	return strings.NewReplacer("-", "_", ".", "_").Replace(n)
}
