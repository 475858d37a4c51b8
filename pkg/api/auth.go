package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"codectx/pkg/index"
)

// AllTenants in Keys grants a key every tenant (an operator's key).
const AllTenants = "*"

// Keys maps the SHA-256 (hex) of each API key to the tenant it may act
// for. Only hashes are kept, so a leaked configuration reveals no key.
type Keys map[string]string

// HashKey is the form a key is listed under in Keys.
func HashKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// authorize checks the request's bearer key against tenant. With no keys
// configured the API is open (a single-user `codectx up` on loopback).
// It writes the error answer and returns false when the request may not
// proceed: 401 without a known key, 403 for a key of another tenant.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, tenant string) bool {
	if len(s.Keys) == 0 {
		return s.allow(w, tenant)
	}
	owner, known, sent := s.keyOwner(r)
	if !sent {
		w.Header().Set("WWW-Authenticate", `Bearer realm="codectx"`)
		writeError(w, http.StatusUnauthorized, fmt.Errorf("an API key is required (Authorization: Bearer KEY)"))
		return false
	}
	switch {
	case !known:
		w.Header().Set("WWW-Authenticate", `Bearer realm="codectx", error="invalid_token"`)
		writeError(w, http.StatusUnauthorized, fmt.Errorf("unknown API key"))
		return false
	case owner != AllTenants && owner != tenant:
		// Say no more than that the key does not reach this tenant: not
		// whether the tenant or its repositories exist.
		writeError(w, http.StatusForbidden, fmt.Errorf("this API key is not valid for tenant %q", tenant))
		return false
	}
	return s.allow(w, tenant)
}

// operator reports whether the request may act beyond one tenant: always
// on an open API, else only with an AllTenants key.
func (s *Server) operator(r *http.Request) bool {
	if len(s.Keys) == 0 {
		return true
	}
	owner, known, _ := s.keyOwner(r)
	return known && owner == AllTenants
}

// keyOwner looks up the request's bearer key: the tenant it belongs to,
// whether it is known, and whether a key was sent at all.
func (s *Server) keyOwner(r *http.Request) (owner string, known, sent bool) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return "", false, false
	}
	owner, known = s.Keys.lookup(tok)
	return owner, known, true
}

// principal authenticates a request that acts for the tenant of its key
// (MCP): with no keys configured, an operator of the default tenant. It
// writes the 401 answer and returns false without a known key.
func (s *Server) principal(w http.ResponseWriter, r *http.Request) (Principal, bool) {
	if len(s.Keys) == 0 {
		return Principal{Tenant: index.DefaultTenant, Operator: true}, true
	}
	owner, known, sent := s.keyOwner(r)
	switch {
	case !sent:
		w.Header().Set("WWW-Authenticate", `Bearer realm="codectx"`)
		writeError(w, http.StatusUnauthorized, fmt.Errorf("an API key is required (Authorization: Bearer KEY)"))
		return Principal{}, false
	case !known:
		w.Header().Set("WWW-Authenticate", `Bearer realm="codectx", error="invalid_token"`)
		writeError(w, http.StatusUnauthorized, fmt.Errorf("unknown API key"))
		return Principal{}, false
	case owner == AllTenants:
		return Principal{Tenant: index.DefaultTenant, Operator: true}, true
	}
	return Principal{Tenant: owner}, true
}

// lookup finds the tenant of key. It compares the key's hash with every
// listed hash in constant time, whatever their case, so that neither the
// timing nor the file's spelling of the hex decides.
func (k Keys) lookup(key string) (owner string, known bool) {
	sum := sha256.Sum256([]byte(key))
	for h, t := range k {
		want, err := hex.DecodeString(h)
		if err == nil && subtle.ConstantTimeCompare(want, sum[:]) == 1 {
			owner, known = t, true
		}
	}
	return owner, known
}
