package main

import (
	"bytes"
	"context"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Another local user of the machine must not read tenants' source from
// the data directory: after up has indexed two tenants' repositories (clone
// caches, Temporal's database, the store, NATS), no directory under it is
// open to group or others, so no file in it can be reached.
func TestSecurityDataDirPrivate(t *testing.T) {
	s := startSecureUp(t)
	s.waitSettled(t, tenantB, "vault")
	var open []string
	err := filepath.WalkDir(s.data, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // removed while walking (temp files)
			}
			return err
		}
		if !d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if info.Mode().Perm()&0o077 != 0 {
			rel, _ := filepath.Rel(s.data, path)
			open = append(open, rel+" "+info.Mode().Perm().String())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(open) > 0 {
		t.Errorf("directories of the data dir open to other local users: %v", open)
	}
}

// up refuses an admin.key that is a symbolic link (planted by another
// local user while the data directory was open, or made in a shared
// working directory) before anything is started: the link's target is
// neither written nor chmodded.
func TestSecurityUpRefusesSymlinkedAdminKey(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(root, "victim.conf")
	if err := os.WriteFile(victim, []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(victim, 0o644)
	if err := os.Symlink(victim, filepath.Join(data, "admin.key")); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	err := runUp(refuseCtx(t), []string{"--data", data, "--keys", "--listen", "127.0.0.1:0"}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("up = %v; want a refusal of the symlinked admin.key (stdout %q)", err, out.String())
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep me\n" {
		t.Errorf("the link's target now holds %q", b)
	}
	if st, _ := os.Stat(victim); st.Mode().Perm() != 0o644 {
		t.Errorf("the link's target mode is %v", st.Mode().Perm())
	}
}

// up refuses a data directory that is a symbolic link another user made
// (it could point it anywhere), and leaves the directory it points to as
// it was; the user's own link to the user's own directory is followed
// (data on another disk: TestUpLosesTemporalState).
func TestSecurityUpRefusesSymlinkedDataDir(t *testing.T) {
	root := t.TempDir()
	target := filepath.Join(root, "elsewhere")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(target, 0o755)
	data := filepath.Join(root, "data")
	if err := os.Symlink(target, data); err != nil {
		t.Fatal(err)
	}
	// Another user's link: made as root, given to another uid.
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the link to another uid")
	}
	if err := os.Lchown(data, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	err := runUp(refuseCtx(t), []string{"--data", data, "--keys", "--listen", "127.0.0.1:0"}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "symbolic link owned by uid 65534") {
		t.Fatalf("up = %v; want a refusal of the symlinked data directory", err)
	}
	if st, _ := os.Stat(target); st.Mode().Perm() != 0o755 {
		t.Errorf("the link's target was chmodded to %v", st.Mode().Perm())
	}
	if ents, _ := os.ReadDir(target); len(ents) != 0 {
		t.Errorf("files were put in the link's target: %v", ents)
	}
}

// A webhook secrets file anyone may write is refused.
func TestWebhookSecretsFileWritableRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "secrets.json")
	if err := os.WriteFile(p, []byte(`{"acme": "0123456789abcdef"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := (&webhookFlags{secretsFile: p}).config(); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, 0o666)
	if _, err := (&webhookFlags{secretsFile: p}).config(); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("config = %v; want a refusal of a world-writable secrets file", err)
	}
}

// A credential given as a flag works but draws a warning on stderr: every
// local user can read a process's arguments. Given in its variable, or a
// NATS URL without credentials, draws none.
func TestSecretFlagWarning(t *testing.T) {
	parse := func(args ...string) (config, string) {
		t.Helper()
		var c config
		var errb bytes.Buffer
		fs := flag.NewFlagSet("query-service", flag.ContinueOnError)
		fs.SetOutput(&errb)
		c.flags(fs, useNATS|useStore)
		if err := parseFlags(fs, args); err != nil {
			t.Fatal(err)
		}
		return c, errb.String()
	}
	c, warn := parse("--nats", "nats://user:hunter2@nats:4222", "--s3-access-key", "AKIA", "--s3-secret-key", "s3cr3t")
	if c.nats != "nats://user:hunter2@nats:4222" || c.s3.AccessKey != "AKIA" || c.s3.SecretKey != "s3cr3t" {
		t.Errorf("flags not in force: %q %q %q", c.nats, c.s3.AccessKey, c.s3.SecretKey)
	}
	for _, want := range []string{"--nats", "$" + envNATS, "--s3-access-key", "$" + envS3Access, "--s3-secret-key", "$" + envS3Secret} {
		if !strings.Contains(warn, want) {
			t.Errorf("warning %q does not name %s", warn, want)
		}
	}
	if strings.Contains(warn, "hunter2") || strings.Contains(warn, "s3cr3t") {
		t.Errorf("warning repeats the credential: %q", warn)
	}
	if _, warn := parse("--nats", "nats://token@nats:4222"); !strings.Contains(warn, "--nats") {
		t.Errorf("a token in --nats drew no warning: %q", warn)
	}
	if _, warn := parse("--nats", "nats://nats:4222"); warn != "" {
		t.Errorf("a NATS URL without credentials drew %q", warn)
	}
	t.Setenv(envNATS, "nats://user:hunter2@nats:4222")
	t.Setenv(envS3Secret, "s3cr3t")
	if c, warn := parse(); warn != "" || c.s3.SecretKey != "s3cr3t" {
		t.Errorf("credentials in the environment drew %q (secret %q)", warn, c.s3.SecretKey)
	}
}

// refuseCtx bounds an up that is expected to refuse at once: should it
// start instead, it stops and the test fails rather than hangs.
func refuseCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}
