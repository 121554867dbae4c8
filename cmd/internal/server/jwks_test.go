package server_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/golang-jwt/jwt/v5"

	"github.com/presencekit/presence/cmd/internal/server"
)

// idpKey is a signing key of the test's identity provider.
type idpKey struct {
	kid    string
	method jwt.SigningMethod
	priv   crypto.Signer
	alg    string // the JWK's "alg"; "" to leave it out
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jwk is k's public half as a JWK.
func (k idpKey) jwk() map[string]any {
	m := map[string]any{"kid": k.kid, "use": "sig"}
	if k.alg != "" {
		m["alg"] = k.alg
	}
	switch p := k.priv.Public().(type) {
	case *rsa.PublicKey:
		m["kty"], m["n"], m["e"] = "RSA", b64(p.N.Bytes()), b64(big.NewInt(int64(p.E)).Bytes())
	case *ecdsa.PublicKey:
		size := (p.Curve.Params().BitSize + 7) / 8
		m["kty"], m["crv"] = "EC", p.Curve.Params().Name
		m["x"], m["y"] = b64(p.X.FillBytes(make([]byte, size))), b64(p.Y.FillBytes(make([]byte, size)))
	case ed25519.PublicKey:
		m["kty"], m["crv"], m["x"] = "OKP", "Ed25519", b64(p)
	}
	return m
}

// sign returns a token for user signed by k, valid for an hour.
func (k idpKey) sign(t testing.TB, user string, claims ...string) string {
	t.Helper()
	c := jwt.MapClaims{"sub": user, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}
	for _, name := range claims {
		c[name] = true
	}
	tok := jwt.NewWithClaims(k.method, c)
	if k.kid != "" {
		tok.Header["kid"] = k.kid
	}
	s, err := tok.SignedString(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func rsaKey(t testing.TB, kid string, bits int) idpKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	return idpKey{kid: kid, method: jwt.SigningMethodRS256, priv: k, alg: "RS256"}
}

func ecKey(t testing.TB, kid string, curve elliptic.Curve, method jwt.SigningMethod) idpKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return idpKey{kid: kid, method: method, priv: k, alg: method.Alg()}
}

func edKey(t testing.TB, kid string) idpKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return idpKey{kid: kid, method: jwt.SigningMethodEdDSA, priv: k} // no "alg", as some providers publish
}

// idp is an identity provider's JWKS endpoint on loopback, publishing
// what the test sets and counting its fetches.
type idp struct {
	url     string
	fetches atomic.Int64
	mu      sync.Mutex
	keys    []idpKey
	status  int // answered instead of the set when not 0
}

func newIDP(t testing.TB, keys ...idpKey) *idp {
	p := &idp{keys: keys}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.fetches.Add(1)
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.status != 0 {
			w.WriteHeader(p.status)
			return
		}
		set := []map[string]any{}
		for _, k := range p.keys {
			set = append(set, k.jwk())
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": set})
	}))
	t.Cleanup(ts.Close)
	p.url = ts.URL + "/.well-known/jwks.json"
	return p
}

// publish replaces the published set.
func (p *idp) publish(keys ...idpKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys, p.status = keys, 0
}

func (p *idp) fail(status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.status = status
}

// jwksServer starts a server verifying tokens against p (and testSecret
// when withSecret).
func jwksServer(t *testing.T, p *idp, withSecret bool, refresh, unknown time.Duration) *instance {
	t.Helper()
	cfg := testConfig()
	cfg.Auth = server.AuthConfig{JWKSURL: p.url, JWKSRefresh: refresh, JWKSUnknownKIDInterval: unknown}
	if withSecret {
		cfg.Auth.Secret = testSecret
	}
	return startServer(t, newStore(t, miniredis.RunT(t).Addr()), cfg)
}

// statusOf is the HTTP status of alice reading her own status with tok.
func statusOf(t testing.TB, in *instance, tok string) (int, *server.Error) {
	t.Helper()
	return in.as(t, tok).do("GET", "/v1/users/alice/status", nil, nil)
}

// TestJWKSAlgorithms: RS256, ES256 and EdDSA tokens verify against the
// provider's keys, claims included, alone or beside the HS256 secret.
func TestJWKSAlgorithms(t *testing.T) {
	t.Parallel()
	rs, es, ed := rsaKey(t, "rs", 2048), ecKey(t, "es", elliptic.P256(), jwt.SigningMethodES256), edKey(t, "ed")
	p := newIDP(t, rs, es, ed)
	for _, withSecret := range []bool{false, true} {
		in := jwksServer(t, p, withSecret, time.Hour, time.Hour)
		for _, k := range []idpKey{rs, es, ed} {
			if code, e := statusOf(t, in, k.sign(t, "alice")); code != 200 {
				t.Errorf("secret %v, %s: %d %+v", withSecret, k.method.Alg(), code, e)
			}
			if code, e := in.as(t, k.sign(t, "alice")).do("GET", "/v1/users/bob/status", nil, nil); code != 403 {
				t.Errorf("secret %v, %s reading bob: %d %+v, want 403", withSecret, k.method.Alg(), code, e)
			}
			if code, e := in.as(t, k.sign(t, "alice", "presence_read")).do("GET", "/v1/users/bob/status", nil, nil); code != 200 {
				t.Errorf("secret %v, %s with the read claim: %d %+v", withSecret, k.method.Alg(), code, e)
			}
		}
		// A token without a kid is tried against the keys of its algorithm.
		noKid := rs
		noKid.kid = ""
		if code, e := statusOf(t, in, noKid.sign(t, "alice")); code != 200 {
			t.Errorf("secret %v, RS256 without kid: %d %+v", withSecret, code, e)
		}
		code, _ := statusOf(t, in, token(t, "alice"))
		if want := map[bool]int{true: 200, false: 401}[withSecret]; code != want {
			t.Errorf("secret %v, HS256 token: %d, want %d", withSecret, code, want)
		}
	}
	if fetches := p.fetches.Load(); fetches != 2 {
		t.Errorf("%d fetches of the JWKS, want one per server (cached)", fetches)
	}
}

// TestJWKSRefusals: what an attacker can forge without the provider's
// private keys is refused, whatever the mode.
func TestJWKSRefusals(t *testing.T) {
	t.Parallel()
	rs, es := rsaKey(t, "rs", 2048), ecKey(t, "es", elliptic.P256(), jwt.SigningMethodES256)
	small := rsaKey(t, "small", 1024)
	p384 := ecKey(t, "p384", elliptic.P384(), jwt.SigningMethodES384)
	p384.alg = ""        // a P-384 key without "alg": not an ES256 key all the same
	ed := edKey(t, "ed") // published without "alg"
	p := newIDP(t, rs, es, small, p384, ed)
	exp := time.Now().Add(time.Hour).Unix()
	forge := func(method jwt.SigningMethod, kid string, key any) string {
		tok := jwt.NewWithClaims(method, jwt.MapClaims{"sub": "alice", "exp": exp})
		if kid != "" {
			tok.Header["kid"] = kid
		}
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	der, err := x509.MarshalPKIXPublicKey(rs.priv.Public())
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	impostor := rsaKey(t, "rs", 2048) // same kid, not the provider's key
	expired := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(-time.Hour).Unix()})
	expired.Header["kid"] = "rs"
	expiredTok, err := expired.SignedString(rs.priv)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ name, tok string }{
		{"another key under the provider's kid", impostor.sign(t, "alice")},
		{"alg none", forge(jwt.SigningMethodNone, "rs", jwt.UnsafeAllowNoneSignatureType)},
		{"HS256 keyed with the RSA public key (PEM)", forge(jwt.SigningMethodHS256, "rs", pemKey)},
		{"HS256 keyed with the RSA public key (DER)", forge(jwt.SigningMethodHS256, "rs", der)},
		{"HS256 keyed with the RSA modulus", forge(jwt.SigningMethodHS256, "rs", rs.priv.Public().(*rsa.PublicKey).N.Bytes())},
		{"RS384 by the provider's key", forge(jwt.SigningMethodRS384, "rs", rs.priv)},
		{"PS256 by the provider's key", forge(jwt.SigningMethodPS256, "rs", rs.priv)},
		{"ES384 by a published P-384 key", p384.sign(t, "alice")},
		{"ES256 naming the RSA key's kid", forge(jwt.SigningMethodES256, "rs", es.priv)},
		{"RS256 naming the EC key's kid", forge(jwt.SigningMethodRS256, "es", rs.priv)},
		{"RS256 naming an Ed25519 key without alg", forge(jwt.SigningMethodRS256, "ed", rs.priv)},
		{"RS256 by a 1024-bit published key", small.sign(t, "alice")},
		{"expired", expiredTok},
		{"unknown kid", forge(jwt.SigningMethodRS256, "nobody", impostor.priv)},
		{"no kid, not a provider's key", forge(jwt.SigningMethodRS256, "", impostor.priv)},
	}
	for _, withSecret := range []bool{false, true} {
		in := jwksServer(t, p, withSecret, time.Hour, time.Hour)
		for _, tc := range cases {
			code, e := statusOf(t, in, tc.tok)
			if code != 401 || e == nil || e.Code != server.CodeUnauthenticated {
				t.Errorf("secret %v, %s: %d %+v, want 401 unauthenticated", withSecret, tc.name, code, e)
				continue
			}
			t.Logf("secret %v, %s: %s", withSecret, tc.name, e.Message)
		}
		if code, e := statusOf(t, in, rs.sign(t, "alice")); code != 200 {
			t.Errorf("secret %v: the provider's own token: %d %+v", withSecret, code, e)
		}
	}
}

// TestJWKSRotation: a token signed by a key the provider has just published
// (its kid not yet cached) is accepted at once, the cache being refreshed
// for it; unknown kids refresh at most once per interval, and are refused
// at once rather than held.
func TestJWKSRotation(t *testing.T) {
	t.Parallel()
	k1, k2 := rsaKey(t, "k1", 2048), ecKey(t, "k2", elliptic.P256(), jwt.SigningMethodES256)
	p := newIDP(t, k1)
	in := jwksServer(t, p, false, time.Hour, time.Hour)
	if code, e := statusOf(t, in, k1.sign(t, "alice")); code != 200 {
		t.Fatalf("k1: %d %+v", code, e)
	}
	if code, _ := statusOf(t, in, k2.sign(t, "alice")); code != 401 {
		t.Fatalf("k2 before it is published: %d, want 401", code)
	}
	// That unknown kid spent the refresh budget: publishing k2 is not
	// enough within the hour. A fresh server shows the rotation itself.
	in = jwksServer(t, p, false, time.Hour, time.Hour)
	before := p.fetches.Load()
	p.publish(k1, k2)
	if code, e := statusOf(t, in, k2.sign(t, "alice")); code != 200 {
		t.Fatalf("k2 once published: %d %+v", code, e)
	}
	if got := p.fetches.Load() - before; got != 1 {
		t.Fatalf("%d fetches for the new kid, want 1", got)
	}
	if code, e := statusOf(t, in, k1.sign(t, "alice")); code != 200 {
		t.Fatalf("k1 after the rotation: %d %+v", code, e)
	}
	// Tokens naming unknown kids: refused at once, no more fetches.
	ghost := rsaKey(t, "", 2048)
	start := time.Now()
	for i := range 20 {
		k := ghost
		k.kid = "ghost" + string(rune('a'+i))
		if code, _ := statusOf(t, in, k.sign(t, "alice")); code != 401 {
			t.Fatalf("unknown kid: %d, want 401", code)
		}
	}
	if got := p.fetches.Load() - before; got != 1 {
		t.Errorf("%d fetches after 20 unknown kids, want still 1 (rate-limited)", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("20 unknown kids took %v: held rather than refused", d)
	}
	// With a short interval, a second rotation is taken up too.
	in = jwksServer(t, p, false, time.Hour, 10*time.Millisecond)
	k3 := edKey(t, "k3")
	p.publish(k2, k3)
	time.Sleep(20 * time.Millisecond)
	if code, e := statusOf(t, in, k3.sign(t, "alice")); code != 200 {
		t.Fatalf("k3 once published: %d %+v", code, e)
	}
	// k1 went with that refresh.
	if code, _ := statusOf(t, in, k1.sign(t, "alice")); code != 401 {
		t.Fatalf("k1 after the provider removed it: %d, want 401", code)
	}
}

// TestJWKSRefresh: the set is fetched again every refresh interval: a
// key the provider removes stops verifying, and while the provider fails
// the cached keys still verify.
func TestJWKSRefresh(t *testing.T) {
	t.Parallel()
	k1, k2 := rsaKey(t, "k1", 2048), edKey(t, "k2")
	p := newIDP(t, k1, k2)
	in := jwksServer(t, p, false, 50*time.Millisecond, time.Hour)
	for _, k := range []idpKey{k1, k2} {
		if code, e := statusOf(t, in, k.sign(t, "alice")); code != 200 {
			t.Fatalf("%s: %d %+v", k.kid, code, e)
		}
	}
	p.publish(k2)
	waitFor(t, 5*time.Second, "k1's tokens refused after the provider removed it", func() bool {
		code, _ := statusOf(t, in, k1.sign(t, "alice"))
		return code == 401
	})
	p.fail(http.StatusServiceUnavailable)
	n := p.fetches.Load()
	waitFor(t, 5*time.Second, "failed refreshes", func() bool { return p.fetches.Load() >= n+3 })
	if code, e := statusOf(t, in, k2.sign(t, "alice")); code != 200 {
		t.Fatalf("k2 while the provider fails: %d %+v", code, e)
	}
}

// TestJWKSStartup: New fetches the set and says clearly why it cannot.
func TestJWKSStartup(t *testing.T) {
	t.Parallel()
	// the identity providers listen first, so that neither takes the port
	// the closed one just gave back
	notFound := newIDP(t)
	notFound.fail(http.StatusNotFound)
	empty := newIDP(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/jwks"
	ln.Close()
	store := newStore(t, miniredis.RunT(t).Addr())
	for _, tc := range []struct{ url, want string }{
		{closed, "server: cannot fetch the JWKS at " + closed + ": dial tcp " + ln.Addr().String() + ": connect: connection refused"},
		{notFound.url, "server: cannot fetch the JWKS at " + notFound.url + ": invalid HTTP status code: 404"},
		{empty.url, "server: the JWKS at " + empty.url + " has no keys this server can use"},
		{"http://idp.example.com/jwks", `server: JWKS URL "http://idp.example.com/jwks": must be https (plain http only on loopback)`},
		{"idp.example.com/jwks", `server: JWKS URL "idp.example.com/jwks": want https://host/path`},
	} {
		cfg := testConfig()
		cfg.Auth = server.AuthConfig{JWKSURL: tc.url}
		_, err := server.New(store, cfg)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: %v\nwant %s", tc.url, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: a multi-line error: %q", tc.url, err)
		}
	}
	if _, err := server.New(store, server.Config{}); err != server.ErrNoSecret {
		t.Errorf("no secret, no JWKS: %v, want ErrNoSecret", err)
	}
}
