package main

// Ambient SSH credentials: go-git authenticates every ssh:// (and scp-like)
// clone with the SSH agent of the process (SSH_AUTH_SOCK), which is the
// only way codectx can clone a private repository over ssh. A clone URL a
// tenant names is fetched with those credentials too, so a tenant could
// have the server clone any repository the operator's key reaches, another
// tenant's included, into its own tenant and read it.

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"codectx/pkg/api"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// acmePrivateMarker is in acme's private repository, served over ssh only
// to the key the operator's agent holds.
const acmePrivateMarker = "AcmePrivateSSHMarker51c9"

// sshAgent serves an SSH agent holding key on a unix socket and returns
// the socket's path.
func sshAgent(t *testing.T, key ed25519.PrivateKey) string {
	t.Helper()
	kr := agent.NewKeyring()
	if err := kr.Add(agent.AddedKey{PrivateKey: key}); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "agent")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); agent.ServeAgent(kr, c) }()
		}
	}()
	return sock
}

// sshGitServer serves `git upload-pack` of the repositories under root over
// SSH on loopback, to clients authenticating with allowed only. It returns
// its address, its host key and a counter of upload-packs served.
func sshGitServer(t *testing.T, root string, allowed ssh.PublicKey) (string, ssh.PublicKey, *atomic.Int32) {
	t.Helper()
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if string(k.Marshal()) == string(allowed.Marshal()) {
			return nil, nil
		}
		return nil, errors.New("unknown key")
	}}
	cfg.AddHostKey(hostSigner)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	served := &atomic.Int32{}
	go func() {
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				_, chans, reqs, err := ssh.NewServerConn(nc, cfg)
				if err != nil {
					return
				}
				go ssh.DiscardRequests(reqs)
				for nch := range chans {
					if nch.ChannelType() != "session" {
						nch.Reject(ssh.UnknownChannelType, "session only")
						continue
					}
					ch, creqs, err := nch.Accept()
					if err != nil {
						return
					}
					go serveUploadPack(root, ch, creqs, served)
				}
			}()
		}
	}()
	return l.Addr().String(), hostSigner.PublicKey(), served
}

func serveUploadPack(root string, ch ssh.Channel, reqs <-chan *ssh.Request, served *atomic.Int32) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" {
			req.Reply(req.Type == "env", nil)
			continue
		}
		if len(req.Payload) < 4 {
			req.Reply(false, nil)
			return
		}
		cmdline := string(req.Payload[4:][:binary.BigEndian.Uint32(req.Payload)])
		verb, path, _ := strings.Cut(cmdline, " ")
		path = strings.Trim(path, "'")
		if verb != "git-upload-pack" || strings.Contains(path, "..") {
			req.Reply(false, nil)
			return
		}
		req.Reply(true, nil)
		served.Add(1)
		cmd := exec.Command("git", "upload-pack", filepath.Join(root, filepath.FromSlash(path)))
		cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
		cmd.WaitDelay = 2 * time.Second
		code := uint32(0)
		if err := cmd.Run(); err != nil {
			code = 1
		}
		ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{code}))
		return
	}
}

// TestSecuritySSHAmbientCredentials: the operator indexes acme's private
// repository over ssh (the server's agent holds the only key the git host
// takes). beta, with its own tenant key or webhook secret, names the same
// ssh URL: it must not get acme's code into its tenant.
func TestSecuritySSHAmbientCredentials(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git binary to serve upload-pack")
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	commitTree(t, filepath.Join(root, "acme", "private.git"), map[string]string{
		"billing/ledger.go": "package billing\n\n// LedgerKey signs acme's ledger.\nconst LedgerKey = \"" + acmePrivateMarker + "\"\n",
	})
	addr, hostKey, served := sshGitServer(t, root, sshPub)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(kh, []byte(knownhosts.Line([]string{knownhosts.Normalize(addr)}, hostKey)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The operator's environment: an agent holding the key, and the git
	// host's key in known_hosts. `up` runs in this process.
	t.Setenv("SSH_AUTH_SOCK", sshAgent(t, priv))
	t.Setenv("SSH_KNOWN_HOSTS", kh)

	s := startSecureUp(t, "--allow-hosts", addr)
	url := "ssh://git@" + addr + "/acme/private.git"

	// Positive control: the operator indexes acme's private repository.
	s.index(t, tenantA, "private", url)
	if served.Load() == 0 {
		t.Fatal("the ssh git host served nothing: the control did not clone over ssh")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := s.client(tenantA).Query(ctx, api.QueryRequest{Tenant: tenantA, Repo: "private", Query: "LedgerKey", Budget: 2000})
	if err != nil || !strings.Contains(resp.Context, acmePrivateMarker) {
		t.Fatalf("acme's own query of its private repository: %v", err)
	}

	// beta's read of acme's private code, by the API and by a webhook.
	stolen := func(t *testing.T, repo string) {
		t.Helper()
		st := s.waitSettled(t, tenantB, repo)
		if st == nil || st.Head == nil {
			return
		}
		s.repos[tenantB] = append(s.repos[tenantB], repo)
		resp, err := s.client(tenantB).Query(ctx, api.QueryRequest{Tenant: tenantB, Repo: repo, Query: "LedgerKey", Budget: 2000})
		if err == nil && strings.Contains(resp.Context, acmePrivateMarker) {
			t.Errorf("beta cloned acme's private repository with the server's SSH credentials and reads it: %.200s", resp.Context)
		} else {
			t.Errorf("beta's clone of acme's ssh URL was published (%s): %+v", st.LastCommit, st)
		}
	}
	t.Run("index", func(t *testing.T) {
		b, _ := json.Marshal(api.IndexRequest{Tenant: tenantB, Repo: "copy", Location: url})
		code, body := s.do(t, "POST", "/v1/index", tenantB, string(b))
		if code == 202 {
			stolen(t, "copy")
			return
		}
		if code != 403 {
			t.Errorf("beta's index of an ssh URL = %d %s, want 403", code, body)
		}
	})
	t.Run("webhook", func(t *testing.T) {
		code, body := s.webhook(t, tenantB, githubPush("beta/hooked", url, s.commit[tenantA+"/private"]), true)
		if code == 202 {
			stolen(t, "beta/hooked")
			return
		}
		if code != 403 {
			t.Errorf("beta's webhook with an ssh clone URL = %d %s, want 403", code, body)
		}
	})
}
