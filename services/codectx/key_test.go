package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"codectx/pkg/keys"
)

// TestKeyCommandsLive: `up --keys` writes an admin key on first start;
// keys created and revoked with `codectx key` take effect on the running
// server without a restart.
func TestKeyCommandsLive(t *testing.T) {
	data := t.TempDir()
	addr := freeAddr(t)
	up := startUp(t, "--data", data, "--listen", addr, "--keys")
	up.waitFor(t, "serving line", time.Minute, func() bool { return strings.Contains(up.out.String(), "serving on") })
	adminFile := filepath.Join(data, "admin.key")
	st, err := os.Stat(adminFile)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("admin key file: %v (mode %v)", err, st.Mode().Perm())
	}
	admin, _ := os.ReadFile(adminFile)
	list := func(key string) int {
		req, _ := http.NewRequest("GET", "http://"+addr+"/v1/repos?tenant=acme", nil)
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := list(""); code != 401 {
		t.Fatalf("no key: HTTP %d, want 401", code)
	}
	if code := list(strings.TrimSpace(string(admin))); code != 200 {
		t.Fatalf("admin key: HTTP %d, want 200", code)
	}
	out, err := runCLI(t, "key", "create", "--data", data, "--tenant", "acme", "--scope", "query")
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(out)
	if code := list(key); code != 200 {
		t.Fatalf("new key: HTTP %d, want 200", code)
	}
	out, err = runCLI(t, "key", "list", "--data", data)
	if err != nil || strings.Contains(out, key) || !strings.Contains(out, "acme") || !strings.Contains(out, "admin") || !strings.HasPrefix(out, "ID ") {
		t.Fatalf("key list = %q, %v (must not show keys; a header first)", out, err)
	}
	var id string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[1] == "acme" {
			id = f[0]
		}
	}
	if _, err := runCLI(t, "key", "revoke", id, "--data", data); err != nil { // flags after the id too
		t.Fatal(err)
	}
	if code := list(key); code != 401 {
		t.Fatalf("revoked key: HTTP %d, want 401", code)
	}
	if _, err := runCLI(t, "key", "create", "--data", data, "--tenant", "acme", "--scope", "root"); err == nil {
		t.Error("an unknown scope was accepted")
	}
	// A restart says that keys are on and where the admin key went: it
	// said nothing, and nothing told that requests need a key.
	up.stop(t)
	again := startUp(t, "--data", data, "--listen", freeAddr(t), "--keys")
	again.waitFor(t, "serving line", time.Minute, func() bool { return strings.Contains(again.out.String(), "serving on") })
	if out := again.out.String(); !strings.Contains(out, "codectx up: keys on (") || !strings.Contains(out, "admin.key") {
		t.Errorf("restart with --keys printed:\n%s", out)
	}
}

// TestUpKeysWithKeyFile: up --keys --api-keys FILE takes FILE's keys and
// says that --keys is ignored (no DATA/keys.json, no admin key), where it
// was silent and the operator looked for DATA/admin.key.
func TestUpKeysWithKeyFile(t *testing.T) {
	data := t.TempDir()
	file := filepath.Join(t.TempDir(), "keys.json")
	if _, err := runCLI(t, "key", "create", "--file", file, "--tenant", "*", "--scope", "admin"); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	up := startUp(t, "--data", data, "--listen", addr, "--keys", "--api-keys", file)
	up.waitFor(t, "serving line", time.Minute, func() bool { return strings.Contains(up.out.String(), "serving on") })
	if want := "--keys ($" + envKeys + ") ignored: the keys are those of --api-keys " + file; !strings.Contains(up.errs.String(), want) {
		t.Errorf("up --keys --api-keys: stderr lacks %q:\n%s", want, up.errs.String())
	}
	for _, name := range []string{"admin.key", "keys.json"} {
		if _, err := os.Stat(filepath.Join(data, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("up --keys --api-keys wrote DATA/%s: %v", name, err)
		}
	}
}

func TestParseInterspersed(t *testing.T) {
	for _, c := range []struct {
		args []string
		pos  string
		data string
	}{
		{[]string{"--data", "d", "id"}, "id", "d"},
		{[]string{"id", "--data", "d"}, "id", "d"},
		{[]string{"a", "--data=d", "b"}, "a b", "d"},
		{[]string{"--data", "d", "--", "-odd", "--data"}, "-odd --data", "d"},
		{nil, "", ""},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		data := fs.String("data", "", "")
		pos, err := parseInterspersed(fs, c.args)
		if err != nil || strings.Join(pos, " ") != c.pos || *data != c.data {
			t.Errorf("%q: %q, data %q, %v; want %q, data %q", c.args, pos, *data, err, c.pos, c.data)
		}
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if _, err := parseInterspersed(fs, []string{"id", "--nope"}); err == nil {
		t.Error("an unknown flag after the id was accepted")
	}
}

// TestKeyListNoFile: key list of a key file that does not exist says so
// and fails, rather than listing nothing; an existing file without keys
// lists nothing and succeeds.
func TestKeyListNoFile(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.json")
	if err := os.WriteFile(empty, []byte(`{"keys": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.json")
	for _, c := range []struct {
		name string
		args []string
		err  string // "" = success
	}{
		{"missing file", []string{"--file", missing}, "no key file at " + missing},
		{"missing file, json", []string{"--json", "--file", missing}, "no key file at " + missing},
		{"missing data dir", []string{"--data", filepath.Join(dir, "nodata")}, "no key file at " + filepath.Join(dir, "nodata", "keys.json")},
		{"empty file", []string{"--file", empty}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := runCLI(t, append([]string{"key", "list"}, c.args...)...)
			if c.err == "" {
				if err != nil || out != "" {
					t.Fatalf("key list = %q, %v; want nothing and no error", out, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "codectx key create") {
				t.Fatalf("key list = %q, %v; want an error saying %q", out, err, c.err)
			}
		})
	}
	// key revoke of a missing file says so, not that the id is unknown,
	// and writes no file.
	if _, err := runCLI(t, "key", "revoke", "kNOPE", "--file", missing); err == nil || !strings.Contains(err.Error(), "no key file at "+missing) {
		t.Errorf("key revoke with no key file: %v, want no key file", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("key revoke with no key file created it: %v", err)
	}
	if _, err := runCLI(t, "key", "revoke", "kNOPE", "--file", empty); err == nil || !strings.Contains(err.Error(), "no such key") {
		t.Errorf("key revoke of an unknown id: %v, want no such key", err)
	}
}

// TestKeysRestart: a restart with --keys whose admin key was revoked says
// so (the line before sends the operator to admin.key), and one whose key
// file has no key left says how to make one, where the key file's check
// said "leave the file unset for an open API" of a file --keys set.
func TestKeysRestart(t *testing.T) {
	data := t.TempDir()
	file, admin := filepath.Join(data, "keys.json"), filepath.Join(data, "admin.key")
	if _, err := keys.Bootstrap(file, admin); err != nil {
		t.Fatal(err)
	}
	if note, err := keysRestart(file, admin, data); note != "" || err != nil {
		t.Errorf("the first start's keys: %q, %v; want nothing to say", note, err)
	}
	if line := keysOnLine(file, admin); !strings.Contains(line, "admin key of the first start was written to "+admin) {
		t.Errorf("restart line %q; want where the admin key is", line)
	}
	// Keys made by key create before the first start: up wrote no admin
	// key, and said it had.
	other := t.TempDir()
	if _, err := runCLI(t, "key", "create", "--data", other, "--tenant", "acme"); err != nil {
		t.Fatal(err)
	}
	otherFile, otherAdmin := filepath.Join(other, "keys.json"), filepath.Join(other, "admin.key")
	if made, err := keys.Bootstrap(otherFile, otherAdmin); made || err != nil {
		t.Fatalf("bootstrap over a key file: made %v, %v", made, err)
	}
	if line := keysOnLine(otherFile, otherAdmin); !strings.Contains(line, "no admin key was written to "+otherAdmin) {
		t.Errorf("restart line %q; want it to say no admin key was written", line)
	}
	if _, err := runCLI(t, "key", "create", "--data", data, "--tenant", "acme"); err != nil {
		t.Fatal(err)
	}
	ks, err := keys.List(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range ks {
		if k.Tenant != keys.AllTenants {
			continue
		}
		if _, err := runCLI(t, "key", "revoke", "--data", data, k.ID); err != nil {
			t.Fatal(err)
		}
	}
	if note, err := keysRestart(file, admin, data); err != nil || !strings.Contains(note, "admin key in "+admin+" was revoked") || !strings.Contains(note, "key create --data "+data+" --tenant '*' --scope admin") {
		t.Errorf("admin key revoked: %q, %v; want a note saying so and how to make another", note, err)
	}
	ks, _ = keys.List(file)
	for _, k := range ks {
		if _, err := runCLI(t, "key", "revoke", "--data", data, k.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := keysRestart(file, admin, data); err == nil || !strings.Contains(err.Error(), "holds no key") || !strings.Contains(err.Error(), "key create --data "+data) || strings.Contains(err.Error(), "leave the file unset") {
		t.Errorf("no key left: %v; want an error saying how to make one", err)
	}
}

// TestKeyCreateWhere: key create makes no directory (a mistyped --file,
// or --data of a directory up never made, wrote a key file no server
// reads), names the file by its absolute path, and says when the file is
// new how a server reads it.
func TestKeyCreateWhere(t *testing.T) {
	root := t.TempDir()
	for _, args := range [][]string{
		{"key", "create", "--file", filepath.Join(root, "mistyped", "dir", "keys.json"), "--tenant", "acme"},
		{"key", "create", "--data", filepath.Join(root, "nodata"), "--tenant", "acme"},
	} {
		if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), "no ") {
			t.Errorf("%s: %v, want it refused", strings.Join(args, " "), err)
		}
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Errorf("key create made %v", ents)
	}
	data := filepath.Join(root, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	create := func() string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := run(context.Background(), []string{"key", "create", "--data", data, "--tenant", "acme"}, &out, &errOut); err != nil {
			t.Fatal(err)
		}
		return errOut.String()
	}
	file := filepath.Join(data, "keys.json")
	if msg := create(); !strings.Contains(msg, "in "+file) || !strings.Contains(msg, "new key file") {
		t.Errorf("first key create said %q; want the absolute path and that the file is new", msg)
	}
	if fi, err := os.Stat(data); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("data directory after key create: %v %v, want mode 0700 (as up makes it)", fi.Mode(), err)
	}
	if msg := create(); strings.Contains(msg, "new key file") {
		t.Errorf("second key create said %q; the file is not new", msg)
	}
}
