package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"codectx/pkg/index"
	"codectx/pkg/keys"
)

// AllTenants in Keys grants a key every tenant (an operator's key).
const AllTenants = "*"

// Keys maps the SHA-256 (hex) of each API key to the tenant it may act
// for. Only hashes are kept, so a leaked configuration reveals no key.
// A tenant's key here has scope index, an AllTenants key scope admin.
type Keys map[string]string

// KeyStore looks keys up in a store that may change while the server
// runs (keys.File re-reads its file).
type KeyStore interface {
	Lookup(key string) (keys.Key, bool)
}

// keyErrer is a KeyStore that can hold no key for a reason (keys.File:
// its file does not parse or is gone).
type keyErrer interface{ Err() error }

// keyStoreErr returns why the key store holds no key (nil: it is usable)
// and logs each new reason once, and the recovery, for the operator.
func (s *Server) keyStoreErr() error {
	e, ok := s.KeyStore.(keyErrer)
	if !ok {
		return nil
	}
	err := e.Err()
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	s.keyErrMu.Lock()
	old := s.keyErr
	s.keyErr = msg
	s.keyErrMu.Unlock()
	switch {
	case msg == old:
	case err != nil:
		s.Log.Error("API key file unusable: every key is refused until it is mended", "error", err)
	default:
		s.Log.Info("API key file usable again")
	}
	return err
}

// HashKey is the form a key is listed under in Keys.
func HashKey(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// keysOn reports whether requests need a key.
func (s *Server) keysOn() bool { return len(s.Keys) > 0 || s.KeyStore != nil }

// admit lets a request of the keyed routes in: with keys on, it looks
// the bearer key up (401 without a known one) and, before anything of the
// body or parameters is read, charges the key's own bucket (payer) one
// request and takes one of its slots. A request refused later (400, 413,
// or 403 for a tenant its key does not reach) has then cost its sender
// what one let in does, and its decoding ran under the sender's
// concurrency bound: before, the body was read and its names checked
// first, and a tenant's refused requests escaped both its rate and its
// slots. authorize then checks the tenant and the scope without charging
// again.
//
// With no keys (an open API, one user) there is no key to charge yet:
// authorize charges the tenant the request names, as it always did.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) (keys.Key, bool) {
	if !s.keysOn() {
		return keys.Key{}, true
	}
	k, known, sent := s.keyOwner(r)
	if !known {
		unauthorized(w, sent)
		return keys.Key{}, false
	}
	return k, s.allow(w, r, payer(k))
}

// authorize checks key k, which admit let in, against tenant and the
// scope the route needs. With no keys configured the API is open (a
// single-user `codectx up` on loopback), and the request is charged on
// tenant here. It writes the error answer and returns false when the
// request may not proceed: 403 for a key of another tenant or of a
// narrower scope.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, k keys.Key, tenant string, need keys.Scope) bool {
	_, ok := s.authorizePayer(w, r, k, tenant, need)
	return ok
}

// authorizePayer is authorize, and returns the bucket whose rate let the
// request in (payer), for the routes that charge more for work over many
// repositories.
func (s *Server) authorizePayer(w http.ResponseWriter, r *http.Request, k keys.Key, tenant string, need keys.Scope) (string, bool) {
	if !s.keysOn() {
		return tenant, s.allow(w, r, tenant)
	}
	switch {
	case k.Tenant != AllTenants && k.Tenant != tenant:
		// Say no more than that the key does not reach this tenant: not
		// whether the tenant or its repositories exist.
		writeError(w, http.StatusForbidden, fmt.Errorf("this API key is not valid for tenant %q", tenant))
		return "", false
	case !k.Scope.Allows(need):
		writeError(w, http.StatusForbidden, fmt.Errorf("this API key has scope %s; this needs %s", k.Scope, need))
		return "", false
	}
	// admit charged it already.
	return payer(k), true
}

// operatorBucket is the rate bucket and the slots that operators' keys
// pay with: no tenant is named "*" (index.ValidTenant), so no tenant's
// key can spend the operators' rate or hold their slots, and what an
// operator does for a tenant does not spend that tenant's. Operators'
// keys were charged on tenant default's bucket, and anyone with a key of
// tenant default, even of scope query, could keep the operator's
// requests (a DELETE during an incident) answered 429.
const operatorBucket = AllTenants

// payer is the bucket whose rate and slots a request with key k pays
// with: the operators' for an operator's key, else the key's tenant (the
// only tenant it reaches).
func payer(k keys.Key) string {
	if k.Tenant == AllTenants {
		return operatorBucket
	}
	return k.Tenant
}

// operator reports whether the request may act beyond one tenant: always
// on an open API, else only with an admin key for AllTenants.
func (s *Server) operator(r *http.Request) bool {
	if !s.keysOn() {
		return true
	}
	k, known, _ := s.keyOwner(r)
	return known && k.Tenant == AllTenants && k.Scope.Allows(keys.Admin)
}

// metricsGuard lets /metrics through on an open API or with
// PublicMetrics, else only with an operator's key (any scope): 401
// without a known key (the answer of every route), 403 for a tenant's.
func (s *Server) metricsGuard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.keysOn() && !s.PublicMetrics {
			k, known, sent := s.keyOwner(r)
			switch {
			case !known:
				unauthorized(w, sent)
				return
			case k.Tenant != AllTenants:
				writeError(w, http.StatusForbidden, fmt.Errorf("/metrics needs an operator's API key (tenant %q), not a tenant's", AllTenants))
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// keyOwner looks up the request's bearer key: its entry, whether it is
// known, and whether a key was sent at all.
func (s *Server) keyOwner(r *http.Request) (k keys.Key, known, sent bool) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return keys.Key{}, false, false
	}
	if s.KeyStore != nil {
		if k, ok := s.KeyStore.Lookup(tok); ok {
			return k, true, true
		}
		s.keyStoreErr()
	}
	if owner, ok := s.Keys.lookup(tok); ok {
		sc := keys.Index
		if owner == AllTenants {
			sc = keys.Admin
		}
		return keys.Key{Tenant: owner, Scope: sc}, true, true
	}
	return keys.Key{}, false, true
}

// principal authenticates a request that acts for the tenant of its key
// (MCP): with no keys configured, an operator of the default tenant. An
// operator's key acts for the default tenant unless a call names another,
// and pays with the operators' bucket. It writes the 401 answer and
// returns false without a known key.
func (s *Server) principal(w http.ResponseWriter, r *http.Request) (Principal, bool) {
	if !s.keysOn() {
		return Principal{Tenant: index.DefaultTenant, Payer: index.DefaultTenant, Operator: true}, s.allow(w, r, index.DefaultTenant)
	}
	k, known, sent := s.keyOwner(r)
	if !known {
		unauthorized(w, sent)
		return Principal{}, false
	}
	// Charged before the scope is checked, as admit does: a refused
	// request costs its sender as one let in.
	if !s.allow(w, r, payer(k)) {
		return Principal{}, false
	}
	switch {
	case !k.Scope.Allows(keys.Query):
		writeError(w, http.StatusForbidden, fmt.Errorf("this API key has scope %s; MCP needs query", k.Scope))
		return Principal{}, false
	case k.Tenant == AllTenants:
		return Principal{Tenant: index.DefaultTenant, Payer: operatorBucket, Operator: true}, true
	}
	return Principal{Tenant: k.Tenant, Payer: k.Tenant}, true
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

// tenantOr is the tenant a request acts for: asked, or when it names
// none, its key's tenant (a tenant's key), else the default tenant (an
// operator's key, or no keys). Leaving the tenant out with a tenant's
// key was a 403 for tenant "default" on the REST routes, while the same
// key on /v1/mcp acted for its own tenant.
func (s *Server) tenantOr(r *http.Request, asked string) string {
	if asked != "" {
		return asked
	}
	if s.keysOn() {
		if k, known, _ := s.keyOwner(r); known && k.Tenant != AllTenants {
			return k.Tenant
		}
	}
	return index.DefaultTenant
}

// unauthorized writes the 401 answer to a request without a known key:
// none sent, or (sent) one that is not listed.
func unauthorized(w http.ResponseWriter, sent bool) {
	if !sent {
		w.Header().Set("WWW-Authenticate", `Bearer realm="codectx"`)
		writeError(w, http.StatusUnauthorized, fmt.Errorf("an API key is required (Authorization: Bearer KEY)"))
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="codectx", error="invalid_token"`)
	writeError(w, http.StatusUnauthorized, fmt.Errorf("unknown API key"))
}
