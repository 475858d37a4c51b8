package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"codectx/pkg/api"
	"codectx/pkg/blob"
	"codectx/pkg/index"
	"codectx/pkg/testrepo"
)

// TestReferencesImpactLimit: limit bounds the references and impact
// answers over HTTP, the nearest kept and more counting the rest; out of
// range is a 400, and no limit lists them all.
func TestReferencesImpactLimit(t *testing.T) {
	files := map[string]string{
		"go.mod":       "module example.com/m\n\ngo 1.22\n",
		"core/core.go": "package core\n\n// Total adds.\nfunc Total() int { return 1 }\n",
	}
	const users = 7
	for i := range users {
		files[fmt.Sprintf("u%d/u.go", i)] = fmt.Sprintf("package u%d\n\nimport \"example.com/m/core\"\n\nfunc Use%d() int { return core.Total() }\n", i, i)
	}
	// One more hop: a file that imports u0 only.
	files["top/top.go"] = "package top\n\nimport \"example.com/m/u0\"\n\nfunc Top() int { return u0.Use0() }\n"
	store := blob.NewMem()
	repo := testrepo.New(t)
	repo.Commit("initial", files)
	if _, err := index.Build(context.Background(), store, repo.Dir, index.Options{Tenant: "default", Name: "m", Workers: 1}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&api.Server{Store: store, Routes: api.QueryRoutes}).Handler())
	defer srv.Close()

	var all api.ReferencesOutput
	if code := postJSON(t, srv.URL+"/v1/references", "", `{"name":"Total"}`, &all); code != http.StatusOK {
		t.Fatalf("references: HTTP %d", code)
	}
	if len(all.References) != users || all.More != 0 {
		t.Fatalf("references without a limit: %d listed, %d more; want %d, 0", len(all.References), all.More, users)
	}
	var some api.ReferencesOutput
	if code := postJSON(t, srv.URL+"/v1/references", "", `{"name":"Total","limit":3}`, &some); code != http.StatusOK {
		t.Fatalf("references limit 3: HTTP %d", code)
	}
	if len(some.References) != 3 || some.More != users-3 {
		t.Errorf("references limit 3: %d listed, %d more; want 3, %d", len(some.References), some.More, users-3)
	}
	for i, r := range some.References {
		if r.Provenance != all.References[i].Provenance {
			t.Errorf("reference %d under limit 3: %s, want %s (the first of the whole list)", i, r.Provenance, all.References[i].Provenance)
		}
	}

	var whole api.ImpactOutput
	if code := postJSON(t, srv.URL+"/v1/impact", "", `{"path":"core/core.go"}`, &whole); code != http.StatusOK {
		t.Fatalf("impact: HTTP %d", code)
	}
	if len(whole.Files) != users+1 || whole.More != 0 {
		t.Fatalf("impact without a limit: %v, %d more; want %d files", impacted(whole), whole.More, users+1)
	}
	var near api.ImpactOutput
	if code := postJSON(t, srv.URL+"/v1/impact", "", `{"path":"core/core.go","limit":2.0}`, &near); code != http.StatusOK {
		t.Fatalf("impact limit 2: HTTP %d", code)
	}
	if len(near.Files) != 2 || near.More != users-1 {
		t.Errorf("impact limit 2: %v, %d more; want 2 files, %d more", impacted(near), near.More, users-1)
	}
	for _, f := range near.Files {
		if f.Depth != 1 {
			t.Errorf("impact limit 2 kept %s at depth %d; want the nearest (depth 1) first", f.Path, f.Depth)
		}
	}

	for _, c := range []struct{ path, body string }{
		{"/v1/references", `{"name":"Total","limit":201}`},
		{"/v1/references", `{"name":"Total","limit":-1}`},
		{"/v1/references", `{"name":"Total","limit":1.5}`},
		{"/v1/impact", `{"path":"core/core.go","limit":501}`},
		{"/v1/impact", `{"path":"core/core.go","limit":-3}`},
	} {
		if code, body := postRaw(t, srv.URL+c.path, "", c.body); code != http.StatusBadRequest {
			t.Errorf("%s %s: HTTP %d %s, want 400", c.path, c.body, code, body)
		}
	}
}
