package deploytest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"text/template"

	"gopkg.in/yaml.v3"
)

var chartDir = filepath.Join(repoRoot, "helm", "codectx")

// helmFuncs implements the helm template functions the chart uses, with
// helm's (sprig's) argument order. include needs the template set, so the
// caller passes a pointer that is set once the set is parsed.
func helmFuncs(set **template.Template) template.FuncMap {
	return template.FuncMap{
		"include": func(name string, data any) (string, error) {
			var buf bytes.Buffer
			if err := (*set).ExecuteTemplate(&buf, name, data); err != nil {
				return "", err
			}
			return buf.String(), nil
		},
		"toYaml":     toYaml,
		"indent":     indent,
		"nindent":    func(n int, s string) string { return "\n" + indent(n, s) },
		"quote":      quote,
		"default":    dflt,
		"trunc":      trunc,
		"trimSuffix": func(suffix, s string) string { return strings.TrimSuffix(s, suffix) },
		"replace":    func(old, new, s string) string { return strings.ReplaceAll(s, old, new) },
		"required": func(msg string, v any) (any, error) {
			if empty(v) {
				return nil, errors.New(msg)
			}
			return v, nil
		},
	}
}

// toYaml is helm's toYaml: YAML with two-space indent, no final newline.
func toYaml(v any) (string, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("toYaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return "", fmt.Errorf("toYaml: %w", err)
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

func indent(n int, s string) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(s, "\n", "\n"+pad)
}

// quote is sprig's quote: each non-nil argument as a Go-quoted string.
func quote(args ...any) string {
	var out []string
	for _, a := range args {
		if a != nil {
			out = append(out, fmt.Sprintf("%q", fmt.Sprint(a)))
		}
	}
	return strings.Join(out, " ")
}

// dflt is sprig's default: given, unless it is missing or empty.
func dflt(d any, given ...any) any {
	if len(given) == 0 || empty(given[0]) {
		return d
	}
	return given[0]
}

func empty(v any) bool {
	if v == nil {
		return true
	}
	r := reflect.ValueOf(v)
	switch r.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return r.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return r.IsNil()
	}
	return r.IsZero()
}

// trunc is sprig's trunc: the first c bytes, or all but the last -c.
func trunc(c int, s string) string {
	switch {
	case c < 0 && len(s)+c > 0:
		return s[:len(s)+c]
	case c >= 0 && len(s) > c:
		return s[:c]
	}
	return s
}

// release is the .Release part of the render context.
type release struct {
	Name, Namespace string
}

// renderChart renders every template of the chart in dir the way helm
// does: all files in one template set (so partials in _helpers.tpl are
// visible), each file without a leading underscore executed on its own.
// values is merged over values.yaml, key by key. The result maps a file
// name (e.g. "deployment.yaml") to its output.
func renderChart(dir string, rel release, override map[string]any) (map[string]string, error) {
	var meta struct {
		Name        string `yaml:"name"`
		Version     string `yaml:"version"`
		AppVersion  string `yaml:"appVersion"`
		Description string `yaml:"description"`
	}
	if err := readYAML(filepath.Join(dir, "Chart.yaml"), &meta); err != nil {
		return nil, err
	}
	values := map[string]any{}
	if err := readYAML(filepath.Join(dir, "values.yaml"), &values); err != nil {
		return nil, err
	}
	mergeValues(values, override)
	// helm reads values through JSON, so every number is a float64; do the
	// same so a template that only works on ints fails here too.
	b, err := json.Marshal(values)
	if err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	values = map[string]any{}
	if err := json.Unmarshal(b, &values); err != nil {
		return nil, fmt.Errorf("values: %w", err)
	}
	ctx := map[string]any{
		"Values": values,
		"Release": map[string]any{
			"Name": rel.Name, "Namespace": rel.Namespace, "Service": "Helm",
			"IsInstall": true, "IsUpgrade": false, "Revision": 1,
		},
		"Chart": map[string]any{
			"Name": meta.Name, "Version": meta.Version,
			"AppVersion": meta.AppVersion, "Description": meta.Description,
		},
	}

	files, err := filepath.Glob(filepath.Join(dir, "templates", "*"))
	if err != nil {
		return nil, err
	}
	var set *template.Template
	set = template.New(meta.Name).Funcs(helmFuncs(&set)).Option("missingkey=zero")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if _, err := set.New(filepath.Base(f)).Parse(string(b)); err != nil {
			return nil, fmt.Errorf("parse %s: %w", f, err)
		}
	}
	out := map[string]string{}
	for _, f := range files {
		name := filepath.Base(f)
		if strings.HasPrefix(name, "_") {
			continue
		}
		var buf bytes.Buffer
		if err := set.ExecuteTemplate(&buf, name, ctx); err != nil {
			return nil, fmt.Errorf("render %s: %w", name, err)
		}
		out[name] = buf.String()
	}
	return out, nil
}

func readYAML(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	return nil
}

// mergeValues merges src into dst recursively, as helm merges --set and -f
// values over the chart's values.yaml.
func mergeValues(dst, src map[string]any) {
	for k, v := range src {
		sm, sok := v.(map[string]any)
		dm, dok := dst[k].(map[string]any)
		if sok && dok {
			mergeValues(dm, sm)
			continue
		}
		dst[k] = v
	}
}

// object is one rendered Kubernetes manifest.
type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec yaml.Node         `yaml:"spec"`
	Data map[string]string `yaml:"data"`
	file string
}

type deploymentSpec struct {
	Replicas *int `yaml:"replicas"`
	Selector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"selector"`
	Template struct {
		Metadata struct {
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec struct {
			Containers []container `yaml:"containers"`
			Volumes    []struct {
				Name string `yaml:"name"`
			} `yaml:"volumes"`
		} `yaml:"spec"`
	} `yaml:"template"`
}

type netpolSpec struct {
	PodSelector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"podSelector"`
	PolicyTypes []string `yaml:"policyTypes"`
	Ingress     *[]struct {
		Ports []struct {
			Port string `yaml:"port"`
		} `yaml:"ports"`
		From []map[string]any `yaml:"from"`
	} `yaml:"ingress"`
}

type container struct {
	Name  string   `yaml:"name"`
	Image string   `yaml:"image"`
	Args  []string `yaml:"args"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	EnvFrom []struct {
		ConfigMapRef *struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
	} `yaml:"envFrom"`
	Env []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
			ResourceFieldRef *struct {
				Resource string `yaml:"resource"`
			} `yaml:"resourceFieldRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	LivenessProbe  *probe `yaml:"livenessProbe"`
	ReadinessProbe *probe `yaml:"readinessProbe"`
	Resources      struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type probe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

type serviceSpec struct {
	Selector map[string]string `yaml:"selector"`
	Ports    []struct {
		Port       int    `yaml:"port"`
		TargetPort string `yaml:"targetPort"`
	} `yaml:"ports"`
}

type hpaSpec struct {
	ScaleTargetRef struct {
		Kind string `yaml:"kind"`
		Name string `yaml:"name"`
	} `yaml:"scaleTargetRef"`
	MinReplicas int `yaml:"minReplicas"`
	MaxReplicas int `yaml:"maxReplicas"`
}

// parseManifests splits rendered files into objects. NOTES.txt is text,
// not YAML, and is skipped.
func parseManifests(rendered map[string]string) ([]object, error) {
	var objs []object
	for _, name := range sortedKeys(rendered) {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		dec := yaml.NewDecoder(strings.NewReader(rendered[name]))
		for {
			var n yaml.Node
			err := dec.Decode(&n)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: rendered output is not YAML: %w", name, err)
			}
			if len(n.Content) == 0 || (n.Content[0].Kind == yaml.ScalarNode && n.Content[0].Tag == "!!null") {
				continue // empty document between separators
			}
			var o object
			if err := n.Decode(&o); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			o.file = name
			objs = append(objs, o)
		}
	}
	return objs, nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

const componentLabel = "app.kubernetes.io/component"

// checkChart returns every problem in a rendered chart.
func checkChart(rendered map[string]string) []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, name := range sortedKeys(rendered) {
		if strings.Contains(rendered[name], "{{") || strings.Contains(rendered[name], "}}") {
			bad("%s: unrendered template delimiters", name)
		}
		if strings.Contains(rendered[name], "<no value>") {
			bad("%s: renders a missing value as <no value>", name)
		}
	}
	objs, err := parseManifests(rendered)
	if err != nil {
		return append(errs, err)
	}

	byKind := map[string][]object{}
	for _, o := range objs {
		if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
			bad("%s: object without apiVersion, kind or metadata.name", o.file)
			continue
		}
		if len(o.Metadata.Name) > 63 {
			bad("%s %s: name longer than 63 characters", o.Kind, o.Metadata.Name)
		}
		if o.Metadata.Labels["app.kubernetes.io/name"] == "" || o.Metadata.Labels["app.kubernetes.io/instance"] == "" {
			bad("%s %s: missing app.kubernetes.io/name or instance label", o.Kind, o.Metadata.Name)
		}
		byKind[o.Kind] = append(byKind[o.Kind], o)
	}

	// One ConfigMap with the shared environment.
	var configMap string
	fromSecret := []string{"CODECTX_S3_ACCESS_KEY", "CODECTX_S3_SECRET_KEY"} // env each role must take from a Secret
	switch cms := byKind["ConfigMap"]; len(cms) {
	case 1:
		configMap = cms[0].Metadata.Name
		for _, k := range requiredEnv {
			if k == "CODECTX_S3_ACCESS_KEY" || k == "CODECTX_S3_SECRET_KEY" {
				if _, ok := cms[0].Data[k]; ok {
					bad("ConfigMap %s: holds the S3 credential %s in plain text", configMap, k)
				}
				continue
			}
			if k == "CODECTX_NATS" {
				// The URL may carry credentials: then it comes from a Secret.
				u, ok := cms[0].Data[k]
				switch {
				case !ok:
					fromSecret = append(fromSecret, k)
					continue
				case strings.Contains(u, "@"):
					bad("ConfigMap %s: holds NATS credentials in plain text (%s)", configMap, k)
				}
			}
			if cms[0].Data[k] == "" {
				bad("ConfigMap %s: %s missing", configMap, k)
			}
		}
	default:
		bad("want one ConfigMap, got %d", len(cms))
	}

	// One Deployment per role.
	deployments := map[string]deploymentSpec{} // role -> spec
	names := map[string]string{}               // deployment name -> role
	for _, o := range byKind["Deployment"] {
		role := o.Metadata.Labels[componentLabel]
		var d deploymentSpec
		if err := o.Spec.Decode(&d); err != nil {
			bad("Deployment %s: %v", o.Metadata.Name, err)
			continue
		}
		if _, dup := deployments[role]; dup {
			bad("Deployment %s: a second Deployment for role %q", o.Metadata.Name, role)
		}
		deployments[role] = d
		names[o.Metadata.Name] = role
		checkDeployment(o.Metadata.Name, role, d, configMap, fromSecret, bad)
	}
	for _, role := range roles {
		if _, ok := deployments[role]; !ok {
			bad("role %s: no Deployment", role)
		}
	}
	for role := range deployments {
		if !contains(roles, role) {
			bad("Deployment for unknown role %q", role)
		}
	}

	// selected lists the roles whose pods a label selector matches.
	selected := func(sel map[string]string) []string {
		var roles []string
		for _, r := range sortedKeys(deployments) {
			if subset(sel, deployments[r].Template.Metadata.Labels) {
				roles = append(roles, r)
			}
		}
		return roles
	}

	// Services select the pods of their role and reach a named port.
	services := map[string]bool{}
	for _, o := range byKind["Service"] {
		var s serviceSpec
		if err := o.Spec.Decode(&s); err != nil {
			bad("Service %s: %v", o.Metadata.Name, err)
			continue
		}
		matched := selected(s.Selector)
		if len(matched) != 1 {
			bad("Service %s: selector %v matches the pods of roles %v, want exactly one", o.Metadata.Name, s.Selector, matched)
			continue
		}
		role := matched[0]
		d := deployments[role]
		services[role] = true
		if !strings.HasSuffix(o.Metadata.Name, "-"+role) {
			bad("Service %s: selects %s pods but is not named after the role", o.Metadata.Name, role)
		}
		if len(s.Ports) == 0 {
			bad("Service %s: no ports", o.Metadata.Name)
		}
		for _, p := range s.Ports {
			if len(d.Template.Spec.Containers) > 0 && !hasPort(d.Template.Spec.Containers[0], p.TargetPort) {
				bad("Service %s: targetPort %q is not a port of the %s container", o.Metadata.Name, p.TargetPort, role)
			}
		}
	}
	for _, role := range []string{"query-service", "gateway"} {
		if !services[role] {
			bad("role %s: no Service", role)
		}
	}

	// Network policies select the pods of exactly one role and name only
	// its ports; a role with a Service keeps a rule for its port.
	for _, o := range byKind["NetworkPolicy"] {
		var np netpolSpec
		if err := o.Spec.Decode(&np); err != nil {
			bad("NetworkPolicy %s: %v", o.Metadata.Name, err)
			continue
		}
		matched := selected(np.PodSelector.MatchLabels)
		if len(np.PodSelector.MatchLabels) == 0 || len(matched) != 1 {
			bad("NetworkPolicy %s: podSelector %v matches the pods of roles %v, want exactly one", o.Metadata.Name, np.PodSelector.MatchLabels, matched)
			continue
		}
		role := matched[0]
		if !slices.Equal(np.PolicyTypes, []string{"Ingress"}) {
			bad("NetworkPolicy %s: policyTypes %v, want [Ingress]", o.Metadata.Name, np.PolicyTypes)
		}
		if np.Ingress == nil {
			bad("NetworkPolicy %s: no ingress list (write ingress: [] to take nothing)", o.Metadata.Name)
		}
		for _, rule := range *np.Ingress {
			for _, p := range rule.Ports {
				if !hasPort(deployments[role].Template.Spec.Containers[0], p.Port) {
					bad("NetworkPolicy %s: port %q is not a port of the %s container", o.Metadata.Name, p.Port, role)
				}
			}
		}
		if services[role] && len(*np.Ingress) == 0 {
			bad("NetworkPolicy %s: role %s has a Service but takes no connection", o.Metadata.Name, role)
		}
	}

	// Autoscalers target a Deployment that leaves replicas to them.
	for _, o := range byKind["HorizontalPodAutoscaler"] {
		var h hpaSpec
		if err := o.Spec.Decode(&h); err != nil {
			bad("HorizontalPodAutoscaler %s: %v", o.Metadata.Name, err)
			continue
		}
		role, ok := names[h.ScaleTargetRef.Name]
		if h.ScaleTargetRef.Kind != "Deployment" || !ok {
			bad("HorizontalPodAutoscaler %s: targets %s %q, not a rendered Deployment", o.Metadata.Name, h.ScaleTargetRef.Kind, h.ScaleTargetRef.Name)
			continue
		}
		if deployments[role].Replicas != nil {
			bad("HorizontalPodAutoscaler %s: Deployment %s also sets replicas", o.Metadata.Name, h.ScaleTargetRef.Name)
		}
		if h.MinReplicas < 1 || h.MaxReplicas < h.MinReplicas {
			bad("HorizontalPodAutoscaler %s: replicas %d..%d", o.Metadata.Name, h.MinReplicas, h.MaxReplicas)
		}
	}
	return errs
}

func checkDeployment(name, role string, d deploymentSpec, configMap string, fromSecret []string, bad func(string, ...any)) {
	if len(d.Selector.MatchLabels) == 0 || d.Selector.MatchLabels[componentLabel] != role {
		bad("Deployment %s: selector %v does not pin %s=%s", name, d.Selector.MatchLabels, componentLabel, role)
	}
	if !subset(d.Selector.MatchLabels, d.Template.Metadata.Labels) {
		bad("Deployment %s: selector %v does not match its pod labels %v", name, d.Selector.MatchLabels, d.Template.Metadata.Labels)
	}
	if len(d.Template.Spec.Containers) != 1 {
		bad("Deployment %s: %d containers, want 1", name, len(d.Template.Spec.Containers))
		return
	}
	c := d.Template.Spec.Containers[0]
	if len(c.Args) != 1 || c.Args[0] != role {
		bad("Deployment %s: args %q, want [%s]", name, c.Args, role)
	}
	if c.Image == "" || !strings.Contains(c.Image, ":") || strings.HasSuffix(c.Image, ":") {
		bad("Deployment %s: image %q has no tag", name, c.Image)
	}
	for _, p := range []struct {
		kind, path string
		probe      *probe
	}{{"liveness", "/healthz", c.LivenessProbe}, {"readiness", "/readyz", c.ReadinessProbe}} {
		switch {
		case p.probe == nil || p.probe.HTTPGet == nil:
			bad("Deployment %s: no HTTP %s probe", name, p.kind)
		case p.probe.HTTPGet.Path != p.path:
			bad("Deployment %s: %s probe path %q, want %s", name, p.kind, p.probe.HTTPGet.Path, p.path)
		case !hasPort(c, p.probe.HTTPGet.Port):
			bad("Deployment %s: %s probe port %q is not a container port", name, p.kind, p.probe.HTTPGet.Port)
		}
	}
	for _, res := range []string{"cpu", "memory"} {
		if c.Resources.Requests[res] == "" || c.Resources.Limits[res] == "" {
			bad("Deployment %s: resources.requests/limits.%s not set", name, res)
		}
	}
	fromConfigMap := false
	for _, e := range c.EnvFrom {
		if e.ConfigMapRef != nil && e.ConfigMapRef.Name == configMap && configMap != "" {
			fromConfigMap = true
		}
	}
	if !fromConfigMap {
		bad("Deployment %s: env not taken from ConfigMap %q", name, configMap)
	}
	secrets := map[string]bool{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name != "" && e.ValueFrom.SecretKeyRef.Key != "" {
			secrets[e.Name] = true
		}
	}
	for _, k := range fromSecret {
		if !secrets[k] {
			bad("Deployment %s: %s not taken from a Secret", name, k)
		}
	}
	volumes := map[string]bool{}
	for _, v := range d.Template.Spec.Volumes {
		volumes[v.Name] = true
	}
	for _, m := range c.VolumeMounts {
		if !volumes[m.Name] {
			bad("Deployment %s: mounts volume %q, which the pod does not define", name, m.Name)
		}
	}
}

func hasPort(c container, port string) bool {
	for _, p := range c.Ports {
		if p.Name == port || fmt.Sprint(p.ContainerPort) == port {
			return true
		}
	}
	return false
}

func subset(sub, super map[string]string) bool {
	if len(sub) == 0 {
		return false
	}
	for k, v := range sub {
		if super[k] != v {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func mustRender(t *testing.T, dir string, rel release, override map[string]any) map[string]string {
	t.Helper()
	out, err := renderChart(dir, rel, override)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func kinds(t *testing.T, rendered map[string]string) map[string]int {
	t.Helper()
	objs, err := parseManifests(rendered)
	if err != nil {
		t.Fatal(err)
	}
	n := map[string]int{}
	for _, o := range objs {
		n[o.Kind]++
	}
	return n
}

var testRelease = release{Name: "ctx", Namespace: "codectx"}

func TestChartDefaults(t *testing.T) {
	out := mustRender(t, chartDir, testRelease, nil)
	wantNoErrs(t, checkChart(out))
	got := kinds(t, out)
	want := map[string]int{"ConfigMap": 1, "Deployment": len(roles), "Service": 2}
	if !maps.Equal(got, want) {
		t.Errorf("kinds = %v, want %v", got, want)
	}
	if !strings.Contains(out["deployment.yaml"], "name: ctx-codectx-query-service\n") {
		t.Errorf("deployment.yaml: no Deployment named ctx-codectx-query-service:\n%s", out["deployment.yaml"])
	}
	if !strings.Contains(out["deployment.yaml"], `image: "codectx:0.1.0"`) {
		t.Error("deployment.yaml: image tag does not default to the appVersion")
	}
}

func TestChartAutoscaling(t *testing.T) {
	on := map[string]any{"autoscaling": map[string]any{"enabled": true}}
	out := mustRender(t, chartDir, testRelease, map[string]any{
		"roles": map[string]any{"parse-worker": on, "query-service": on},
	})
	wantNoErrs(t, checkChart(out))
	if got := kinds(t, out)["HorizontalPodAutoscaler"]; got != 2 {
		t.Errorf("HPAs = %d, want 2", got)
	}
	for _, name := range []string{"ctx-codectx-parse-worker", "ctx-codectx-query-service"} {
		if !strings.Contains(out["hpa.yaml"], "    name: "+name+"\n") {
			t.Errorf("hpa.yaml: no autoscaler for %s:\n%s", name, out["hpa.yaml"])
		}
	}
}

func TestChartOverrides(t *testing.T) {
	out := mustRender(t, chartDir, release{Name: "codectx", Namespace: "x"}, map[string]any{
		"image":            map[string]any{"repository": "registry.example.com/codectx", "tag": "1.2.3"},
		"extraEnv":         map[string]any{"CODECTX_LOG": "debug"},
		"imagePullSecrets": []any{map[string]any{"name": "regcred"}},
		"roles": map[string]any{"embed-worker": map[string]any{
			"env":          map[string]any{"CODECTX_EMBED_BATCH": 64},
			"nodeSelector": map[string]any{"gpu": "true"},
		}},
	})
	wantNoErrs(t, checkChart(out))
	for file, want := range map[string]string{
		"deployment.yaml": `image: "registry.example.com/codectx:1.2.3"`,
		"configmap.yaml":  `CODECTX_LOG: "debug"`,
		"service.yaml":    "name: codectx-gateway\n", // release name == chart name
	} {
		if !strings.Contains(out[file], want) {
			t.Errorf("%s: no %q in\n%s", file, want, out[file])
		}
	}
	dep := out["deployment.yaml"]
	for _, want := range []string{"name: CODECTX_EMBED_BATCH\n              value: \"64\"", "nodeSelector:\n        gpu: \"true\"", "imagePullSecrets:\n        - name: regcred"} {
		if !strings.Contains(dep, want) {
			t.Errorf("deployment.yaml: no %q", want)
		}
	}
}

// TestChartNamespaceAndSecret: the orchestrator (only) registers the
// Temporal namespace the ConfigMap names; the S3 Secret is the operator's
// unless createSecret asks the chart for it, which then needs both keys.
func TestChartNamespaceAndSecret(t *testing.T) {
	out := mustRender(t, chartDir, testRelease, map[string]any{"temporal": map[string]any{"namespace": "codectx"}})
	wantNoErrs(t, checkChart(out))
	if !strings.Contains(out["configmap.yaml"], `CODECTX_TEMPORAL_NAMESPACE: "codectx"`) {
		t.Errorf("configmap.yaml: no namespace:\n%s", out["configmap.yaml"])
	}
	objs, err := parseManifests(out)
	if err != nil {
		t.Fatal(err)
	}
	creators := 0
	for _, o := range objs {
		if o.Kind == "Secret" {
			t.Errorf("a Secret %s rendered without s3.createSecret", o.Metadata.Name)
		}
		if o.Kind != "Deployment" {
			continue
		}
		var d deploymentSpec
		if err := o.Spec.Decode(&d); err != nil {
			t.Fatal(err)
		}
		for _, e := range d.Template.Spec.Containers[0].Env {
			if e.Name == "CODECTX_TEMPORAL_CREATE_NAMESPACE" {
				creators++
				if role := o.Metadata.Labels[componentLabel]; role != "orchestrator" || e.Value != "true" {
					t.Errorf("role %s: CODECTX_TEMPORAL_CREATE_NAMESPACE=%q, want only the orchestrator with true", role, e.Value)
				}
			}
		}
	}
	if creators != 1 {
		t.Errorf("%d roles register the namespace, want 1 (the orchestrator)", creators)
	}
	off := mustRender(t, chartDir, testRelease, map[string]any{"temporal": map[string]any{"createNamespace": false}})
	if strings.Contains(off["deployment.yaml"], "CODECTX_TEMPORAL_CREATE_NAMESPACE") {
		t.Error("createNamespace false still registers the namespace")
	}

	s3 := map[string]any{"createSecret": true, "accessKey": "AK", "secretKey": "SK"}
	out = mustRender(t, chartDir, testRelease, map[string]any{"s3": s3})
	wantNoErrs(t, checkChart(out))
	if got := kinds(t, out)["Secret"]; got != 1 {
		t.Fatalf("Secrets = %d, want 1", got)
	}
	sec := out["secret-s3.yaml"]
	for _, want := range []string{"name: codectx-s3\n", `access-key: "AK"`, `secret-key: "SK"`} {
		if !strings.Contains(sec, want) {
			t.Errorf("secret-s3.yaml: no %q in\n%s", want, sec)
		}
	}
	if !strings.Contains(out["deployment.yaml"], "name: codectx-s3\n") {
		t.Error("deployment.yaml: the roles do not read the created Secret")
	}
	if _, err := renderChart(chartDir, testRelease, map[string]any{"s3": map[string]any{"createSecret": true, "accessKey": "AK"}}); err == nil || !strings.Contains(err.Error(), "s3.secretKey is required") {
		t.Errorf("createSecret without secretKey: err = %v, want s3.secretKey is required", err)
	}
}

func TestChartNotes(t *testing.T) {
	notes := mustRender(t, chartDir, testRelease, nil)["NOTES.txt"]
	if strings.Contains(notes, "{{") || strings.Contains(notes, "<no value>") {
		t.Errorf("NOTES.txt not fully rendered:\n%s", notes)
	}
	if !strings.Contains(notes, "svc/ctx-codectx-query-service 7700:7700") {
		t.Errorf("NOTES.txt: no port-forward line for the query service:\n%s", notes)
	}
}

// TestChartCheckCatchesBreakage copies the chart, breaks one template at a
// time, renders it and runs the same checks.
func TestChartCheckCatchesBreakage(t *testing.T) {
	tests := []struct {
		name, file, old, new, want string
	}{
		{"readiness path", "deployment.yaml", "path: /readyz", "path: /ready", `readiness probe path "/ready"`},
		{"liveness port", "deployment.yaml", "path: /healthz\n              port: http", "path: /healthz\n              port: web", `liveness probe port "web"`},
		{"args", "deployment.yaml", "args: [{{ $role | quote }}]", `args: ["up"]`, `args ["up"], want [gateway]`},
		{"no resources", "deployment.yaml", "{{- toYaml $cfg.resources | nindent 12 }}", "{}", "resources.requests/limits.cpu not set"},
		{"no configmap env", "deployment.yaml", "name: {{ include \"codectx.fullname\" $ }}\n", "name: other\n", "env not taken from ConfigMap"},
		{"service selector", "service.yaml", "    app.kubernetes.io/component: {{ $role }}\n{{- end }}", "{{- end }}", "want exactly one"},
		{"service port", "service.yaml", "targetPort: http", "targetPort: api", `targetPort "api"`},
		{"configmap key", "configmap.yaml", "CODECTX_NATS:", "CODECTX_QUEUE:", "CODECTX_NATS not taken from a Secret"},
		{"unrendered", "configmap.yaml", "data:\n", "data:\n  # {{ \"{{\" }} .Values.port }}\n", "unrendered template delimiters"},
		{"missing value", "deployment.yaml", "mountPath: {{ $.Values.dataDir }}", "mountPath: {{ $.Values.dataDirectory }}", "<no value>"},
		{"one template per role broken", "deployment.yaml", "{{- range $role, $cfg := .Values.roles }}", "{{- range $role, $cfg := .Values.roles }}{{- if ne $role \"gateway\" }}", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyChart(t)
			path := filepath.Join(dir, "templates", tt.file)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			text := mustReplace(t, string(b), tt.old, tt.new)
			want := tt.want
			if want == "" { // skip a role: close the extra if before the range's end
				text = strings.TrimSuffix(strings.TrimSpace(text), "{{- end }}") + "{{- end }}\n{{- end }}\n"
				want = "role gateway: no Deployment"
			}
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := renderChart(dir, testRelease, nil)
			if err != nil {
				t.Fatal(err)
			}
			wantErrContaining(t, checkChart(out), want)
		})
	}
}

func TestChartCheckAutoscalerWithReplicas(t *testing.T) {
	dir := copyChart(t)
	path := filepath.Join(dir, "templates", "deployment.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	text := mustReplace(t, string(b), "{{- if not $hpa }}", "{{- if true }}")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out := mustRender(t, dir, testRelease, map[string]any{
		"roles": map[string]any{"parse-worker": map[string]any{"autoscaling": map[string]any{"enabled": true}}},
	})
	wantErrContaining(t, checkChart(out), "also sets replicas")
}

// copyChart copies the chart into a temporary directory.
func copyChart(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "codectx")
	err := filepath.WalkDir(chartDir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(chartDir, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatalf("copy chart: %v", err)
	}
	return dst
}

func TestChartUsesOnlyKnownFunctions(t *testing.T) {
	// Parsing with only these functions fails on any other helm function,
	// which this renderer would not know how to run.
	var set *template.Template
	set = template.New("x").Funcs(helmFuncs(&set))
	files, err := filepath.Glob(filepath.Join(chartDir, "templates", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("templates: %v (%d files)", err, len(files))
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := set.New(filepath.Base(f)).Parse(string(b)); err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
		}
	}
}

func TestHelmFuncs(t *testing.T) {
	y, err := toYaml(map[string]any{"limits": map[string]any{"cpu": "1", "memory": "2Gi"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		got  any
		want any
	}{
		{"trunc short", trunc(5, "abc"), "abc"},
		{"trunc long", trunc(3, "abcdef"), "abc"},
		{"trunc negative", trunc(-2, "abcdef"), "abcd"},
		{"default empty string", dflt("d", ""), "d"},
		{"default missing", dflt("d"), "d"},
		{"default nil", dflt("d", nil), "d"},
		{"default zero", dflt(1, 0), 1},
		{"default set", dflt("d", "x"), "x"},
		{"default false", dflt(true, false), true},
		{"quote string", quote("a\"b"), `"a\"b"`},
		{"quote bool", quote(false), `"false"`},
		{"quote int", quote(64), `"64"`},
		{"quote nil", quote(nil), ""},
		{"indent", indent(2, "a\nb"), "  a\n  b"},
		{"toYaml", y, "limits:\n  cpu: \"1\"\n  memory: 2Gi"},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s: got %#v, want %#v", tt.name, tt.got, tt.want)
		}
	}
}

func TestChartAuth(t *testing.T) {
	out := mustRender(t, chartDir, testRelease, map[string]any{"auth": map[string]any{"existingSecret": "codectx-auth"}})
	wantNoErrs(t, checkChart(out))
	docs := strings.Split(out["deployment.yaml"], "\n---\n")
	seen := 0
	for _, d := range docs {
		var role string
		for _, r := range roles {
			if strings.Contains(d, "app.kubernetes.io/component: "+r+"\n") {
				role = r
			}
		}
		keys := strings.Contains(d, "name: CODECTX_API_KEYS_FILE\n              value: /etc/codectx/auth/api-keys.json")
		hooks := strings.Contains(d, "name: CODECTX_WEBHOOK_SECRETS_FILE")
		mounted := strings.Contains(d, "secretName: codectx-auth") && strings.Contains(d, "mountPath: /etc/codectx/auth")
		switch role {
		case "query-service", "gateway":
			seen++
			if !keys || !mounted || hooks != (role == "gateway") {
				t.Errorf("%s: api keys %v, webhook secrets %v, secret mounted %v", role, keys, hooks, mounted)
			}
		default:
			if keys || hooks || mounted {
				t.Errorf("%s gets the auth secret", role)
			}
		}
	}
	if seen != 2 {
		t.Errorf("found %d of the query-service and gateway Deployments", seen)
	}
	def := mustRender(t, chartDir, testRelease, nil)
	if strings.Contains(def["deployment.yaml"], "CODECTX_API_KEYS_FILE") {
		t.Error("the default chart requires API keys")
	}
}

// The query-service maps the object store's shards from a bounded local
// cache on its data volume (searched in place, not read into the heap);
// the other roles do not get one, and a role's own env overrides it.
func TestChartShardCache(t *testing.T) {
	env := func(out map[string]string) map[string]map[string]string {
		roles := map[string]map[string]string{}
		for role, c := range roleContainers(t, out) {
			m := map[string]string{}
			for _, e := range c.Env {
				m[e.Name] = e.Value
			}
			roles[role] = m
		}
		return roles
	}
	out := mustRender(t, chartDir, testRelease, nil)
	wantNoErrs(t, checkChart(out))
	for role, m := range env(out) {
		dir, bytes := m["CODECTX_SHARD_CACHE"], m["CODECTX_SHARD_CACHE_BYTES"]
		if role == "query-service" {
			if dir != "/data/shard-cache" || bytes != "4294967296" {
				t.Errorf("query-service: shard cache %q, %q; want /data/shard-cache, 4294967296", dir, bytes)
			}
		} else if dir != "" {
			t.Errorf("role %s has a shard cache %q", role, dir)
		}
	}
	own := map[string]any{"roles": map[string]any{"query-service": map[string]any{"env": map[string]any{"CODECTX_SHARD_CACHE": "/cache"}}}}
	out = mustRender(t, chartDir, testRelease, own)
	wantNoErrs(t, checkChart(out))
	if got := env(out)["query-service"]["CODECTX_SHARD_CACHE"]; got != "/cache" {
		t.Errorf("query-service env override: shard cache %q, want /cache", got)
	}
}

// TestChartMemoryBudget checks that the query-service's process budget is
// its container's memory limit (Downward API), that no other role gets
// one, that a role's own CODECTX_MEMORY_BYTES wins without a second entry,
// and that a container without a limit, or memoryBudgetFromLimit false,
// gets none.
func TestChartMemoryBudget(t *testing.T) {
	budgets := func(values map[string]any, limited bool) map[string][]string {
		t.Helper()
		out := mustRender(t, chartDir, testRelease, values)
		if limited { // the chart's checks require memory limits
			wantNoErrs(t, checkChart(out))
		}
		roles := map[string][]string{}
		for role, c := range roleContainers(t, out) {
			for _, e := range c.Env {
				if e.Name != "CODECTX_MEMORY_BYTES" {
					continue
				}
				v := "value " + e.Value
				if e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil {
					v = "from " + e.ValueFrom.ResourceFieldRef.Resource
				}
				roles[role] = append(roles[role], v)
			}
		}
		return roles
	}
	qs := func(m map[string]any) map[string]any {
		return map[string]any{"roles": map[string]any{"query-service": m}}
	}
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   map[string][]string
	}{
		{"default", nil, map[string][]string{"query-service": {"from limits.memory"}}},
		{"own env", qs(map[string]any{"env": map[string]any{"CODECTX_MEMORY_BYTES": "1000000000"}}), map[string][]string{"query-service": {"value 1000000000"}}},
		{"no limit", qs(map[string]any{"resources": map[string]any{"limits": map[string]any{"cpu": "2", "memory": nil}}}), map[string][]string{}},
		{"off", map[string]any{"memoryBudgetFromLimit": false}, map[string][]string{}},
	} {
		if got := budgets(tc.values, tc.name != "no limit"); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: CODECTX_MEMORY_BYTES %v, want %v", tc.name, got, tc.want)
		}
	}
}

// roleContainers decodes the rendered chart's Deployments: each role's
// (component label's) first container.
func roleContainers(t *testing.T, out map[string]string) map[string]container {
	t.Helper()
	objs, err := parseManifests(out)
	if err != nil {
		t.Fatal(err)
	}
	roles := map[string]container{}
	for _, o := range objs {
		if o.Kind != "Deployment" {
			continue
		}
		var d deploymentSpec
		if err := o.Spec.Decode(&d); err != nil {
			t.Fatal(err)
		}
		roles[o.Metadata.Labels[componentLabel]] = d.Template.Spec.Containers[0]
	}
	return roles
}

// With TLS Secrets named, the roles that talk to Temporal (orchestrator,
// gateway) mount its client certificate and every role mounts NATS's; a
// NATS URL with credentials comes from a Secret, never the ConfigMap.
func TestChartTLS(t *testing.T) {
	out := mustRender(t, chartDir, testRelease, map[string]any{
		"temporal": map[string]any{"tls": map[string]any{"existingSecret": "codectx-temporal-tls", "serverName": "temporal.internal"}},
		"nats":     map[string]any{"urlSecret": "codectx-nats", "tls": map[string]any{"existingSecret": "codectx-nats-tls"}},
	})
	wantNoErrs(t, checkChart(out))
	if strings.Contains(out["configmap.yaml"], "CODECTX_NATS") {
		t.Errorf("configmap.yaml holds CODECTX_NATS though the URL is in a Secret:\n%s", out["configmap.yaml"])
	}
	temporalRoles := map[string]bool{"orchestrator": true, "gateway": true}
	for role, c := range roleContainers(t, out) {
		env := map[string]string{}
		natsSecret := ""
		for _, e := range c.Env {
			env[e.Name] = e.Value
			if e.Name == "CODECTX_NATS" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				natsSecret = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
			}
		}
		mounts := map[string]string{}
		for _, m := range c.VolumeMounts {
			mounts[m.Name] = m.MountPath
		}
		if natsSecret != "codectx-nats/url" {
			t.Errorf("%s: CODECTX_NATS from %q, want the Secret codectx-nats/url", role, natsSecret)
		}
		if env["CODECTX_NATS_TLS_CERT"] != "/etc/codectx/nats-tls/tls.crt" || mounts["nats-tls"] != "/etc/codectx/nats-tls" {
			t.Errorf("%s: NATS TLS env %q, mount %q", role, env["CODECTX_NATS_TLS_CERT"], mounts["nats-tls"])
		}
		hasTemporal := env["CODECTX_TEMPORAL_TLS_KEY"] == "/etc/codectx/temporal-tls/tls.key" && mounts["temporal-tls"] == "/etc/codectx/temporal-tls" &&
			env["CODECTX_TEMPORAL_TLS_SERVER_NAME"] == "temporal.internal"
		if hasTemporal != temporalRoles[role] || (!temporalRoles[role] && mounts["temporal-tls"] != "") {
			t.Errorf("%s: Temporal client certificate mounted %v, want %v", role, hasTemporal, temporalRoles[role])
		}
	}
	def := mustRender(t, chartDir, testRelease, nil)
	if strings.Contains(def["deployment.yaml"], "-tls") || !strings.Contains(def["configmap.yaml"], "CODECTX_NATS:") {
		t.Error("the default chart mounts TLS Secrets or takes the NATS URL from a Secret")
	}
	// The check itself: a URL with credentials in the ConfigMap is caught.
	leak := mustRender(t, chartDir, testRelease, map[string]any{"nats": map[string]any{"url": "nats://user:secret@nats:4222"}})
	if errs := checkChart(leak); len(errs) == 0 {
		t.Error("checkChart took NATS credentials in the ConfigMap")
	}
}

// TestChartNetworkPolicy: off by default; on, one policy per role, the
// served roles open to apiFrom (anywhere when empty), every role's port
// to metricsFrom, the others closed.
func TestChartNetworkPolicy(t *testing.T) {
	if n := kinds(t, mustRender(t, chartDir, testRelease, nil))["NetworkPolicy"]; n != 0 {
		t.Errorf("%d NetworkPolicies by default, want none", n)
	}
	out := mustRender(t, chartDir, testRelease, map[string]any{"networkPolicy": map[string]any{"enabled": true}})
	wantNoErrs(t, checkChart(out))
	if n := kinds(t, out)["NetworkPolicy"]; n != len(roles) {
		t.Errorf("%d NetworkPolicies, want one per role (%d)", n, len(roles))
	}
	np := out["networkpolicy.yaml"]
	for _, want := range []string{
		"name: ctx-codectx-parse-worker\n", "ingress: []",
		"name: ctx-codectx-gateway\n", "    - ports:\n        - port: http\n          protocol: TCP\n",
	} {
		if !strings.Contains(np, want) {
			t.Errorf("networkpolicy.yaml: no %q in\n%s", want, np)
		}
	}
	if strings.Contains(np, "from:") {
		t.Errorf("networkpolicy.yaml: a from list with apiFrom and metricsFrom empty:\n%s", np)
	}
	if strings.Count(np, "ingress: []") != len(roles)-2 {
		t.Errorf("networkpolicy.yaml: want the %d roles without a Service closed:\n%s", len(roles)-2, np)
	}

	peer := []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": "monitoring"}}}}
	out = mustRender(t, chartDir, testRelease, map[string]any{"networkPolicy": map[string]any{
		"enabled": true, "metricsFrom": peer,
		"apiFrom": []any{map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"codectx-client": "true"}}}},
	}})
	wantNoErrs(t, checkChart(out))
	np = out["networkpolicy.yaml"]
	if strings.Contains(np, "ingress: []") {
		t.Errorf("networkpolicy.yaml: a closed role although metricsFrom is set:\n%s", np)
	}
	if got := strings.Count(np, "kubernetes.io/metadata.name: monitoring"); got != len(roles) {
		t.Errorf("metricsFrom in %d policies, want %d", got, len(roles))
	}
	if got := strings.Count(np, "codectx-client: \"true\""); got != 2 {
		t.Errorf("apiFrom in %d policies, want the 2 served roles:\n%s", got, np)
	}
}

// The chart check catches a network policy that names a port the pods do
// not have, or that closes a served role.
func TestChartCheckCatchesBadNetworkPolicy(t *testing.T) {
	for _, tt := range []struct{ name, old, new, want string }{
		{"port", "        - port: http\n          protocol: TCP\n      {{- with $.Values.networkPolicy.apiFrom }}", "        - port: web\n          protocol: TCP\n      {{- with $.Values.networkPolicy.apiFrom }}", `port "web"`},
		{"served role closed", "{{- if or $served $metrics }}", "{{- if false }}", "has a Service but takes no connection"},
		{"selector", "      app.kubernetes.io/component: {{ $role }}\n  policyTypes", "  policyTypes", "want exactly one"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyChart(t)
			path := filepath.Join(dir, "templates", "networkpolicy.yaml")
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(mustReplace(t, string(b), tt.old, tt.new)), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := renderChart(dir, testRelease, map[string]any{"networkPolicy": map[string]any{"enabled": true}})
			if err != nil {
				t.Fatal(err)
			}
			wantErrContaining(t, checkChart(out), tt.want)
		})
	}
}

// TestChartAPIHosts: without API keys a server not on loopback answers
// only to IP addresses, localhost and CODECTX_API_HOSTS (421 to others),
// so the chart lists its Services' names there: a client in the cluster
// reaches them by name. extraEnv's CODECTX_API_HOSTS replaces the list.
func TestChartAPIHosts(t *testing.T) {
	hosts := func(out map[string]string) (string, []string) {
		t.Helper()
		objs, err := parseManifests(out)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		var svcs []string
		for _, o := range objs {
			switch o.Kind {
			case "ConfigMap":
				got = o.Data["CODECTX_API_HOSTS"]
			case "Service":
				svcs = append(svcs, o.Metadata.Name)
			}
		}
		return got, svcs
	}
	for _, override := range []map[string]any{nil, {"auth": map[string]any{"existingSecret": "codectx-auth"}}} {
		out := mustRender(t, chartDir, testRelease, override)
		wantNoErrs(t, checkChart(out))
		got, svcs := hosts(out)
		if len(svcs) != 2 {
			t.Fatalf("Services %v, want 2", svcs)
		}
		names := strings.Split(got, ",")
		for _, svc := range svcs {
			for _, want := range []string{svc, svc + ".codectx", svc + ".codectx.svc", svc + ".codectx.svc.cluster.local"} {
				if !slices.Contains(names, want) {
					t.Errorf("auth %v: CODECTX_API_HOSTS %q lacks the Service name %s", override, got, want)
				}
			}
		}
		if len(names) != 4*len(svcs) {
			t.Errorf("auth %v: CODECTX_API_HOSTS %q, want the 4 names of each Service %v", override, got, svcs)
		}
	}
	out := mustRender(t, chartDir, testRelease, map[string]any{"clusterDomain": "corp.internal"})
	if got, _ := hosts(out); !strings.Contains(got, "ctx-codectx-gateway.codectx.svc.corp.internal") {
		t.Errorf("clusterDomain corp.internal: CODECTX_API_HOSTS %q", got)
	}
	// The operator's own list wins, once (a key twice is not a ConfigMap).
	out = mustRender(t, chartDir, testRelease, map[string]any{"extraEnv": map[string]any{"CODECTX_API_HOSTS": "codectx.example.com"}})
	wantNoErrs(t, checkChart(out))
	if got, _ := hosts(out); got != "codectx.example.com" {
		t.Errorf("extraEnv CODECTX_API_HOSTS: ConfigMap has %q", got)
	}
	// No Service, no names.
	off := map[string]any{"service": map[string]any{"enabled": false}}
	out = mustRender(t, chartDir, testRelease, map[string]any{"roles": map[string]any{"query-service": off, "gateway": off}})
	if got, _ := hosts(out); got != "" {
		t.Errorf("without Services: CODECTX_API_HOSTS %q", got)
	}
}
