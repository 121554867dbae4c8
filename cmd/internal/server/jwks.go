package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
)

// jwksAlgs are the algorithms accepted for keys from the JWKS.
var jwksAlgs = []string{jwt.SigningMethodRS256.Alg(), jwt.SigningMethodES256.Alg(), jwt.SigningMethodEdDSA.Alg()}

// jwksFetchTimeout bounds one fetch of the JWKS: at start-up, on each
// refresh, and when a token names an unknown key ID.
const jwksFetchTimeout = 10 * time.Second

// jwksUnknownWait bounds how long a request whose token names an unknown
// key ID may wait for the (rate-limited) refresh it triggers.
const jwksUnknownWait = 5 * time.Second

// minRSABits is the smallest RSA key accepted from the JWKS.
const minRSABits = 2048

// jwks holds the keys of an identity provider's JWK Set: fetched by New,
// fetched again every JWKSRefresh while Run runs, and at once (at most once
// per JWKSUnknownKIDInterval) when a token names a key ID not in the cache.
type jwks struct {
	url     string
	client  *http.Client
	refresh time.Duration
	unknown *rate.Limiter // shared by every fetched set, so it outlives swaps
	log     *slog.Logger
	kf      atomic.Pointer[keyfuncBox]
}

type keyfuncBox struct{ kf keyfunc.Keyfunc }

// checkJWKSURL refuses a URL that is not https, but on loopback hosts
// (a JWKS fetched in clear text could be replaced by anyone on the path).
func checkJWKSURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("server: JWKS URL %q: want https://host/path", raw)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		h := u.Hostname()
		if ip := net.ParseIP(h); h == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
		return fmt.Errorf("server: JWKS URL %q: must be https (plain http only on loopback)", raw)
	}
	return fmt.Errorf("server: JWKS URL %q: want https://host/path", raw)
}

func newJWKS(cfg AuthConfig, log *slog.Logger) (*jwks, error) {
	if err := checkJWKSURL(cfg.JWKSURL); err != nil {
		return nil, err
	}
	client := cfg.JWKSClient
	if client == nil {
		client = &http.Client{Timeout: jwksFetchTimeout,
			// A redirect must not downgrade the fetch to plain http.
			CheckRedirect: func(req *http.Request, via []*http.Request) error {
				if len(via) >= 5 {
					return errors.New("too many redirects")
				}
				return checkJWKSURL(req.URL.String())
			}}
	}
	j := &jwks{url: cfg.JWKSURL, client: client, refresh: cfg.JWKSRefresh, log: log,
		unknown: rate.NewLimiter(rate.Every(cfg.JWKSUnknownKIDInterval), 1)}
	ctx, cancel := context.WithTimeout(context.Background(), jwksFetchTimeout)
	defer cancel()
	if err := j.fetch(ctx); err != nil {
		return nil, err
	}
	return j, nil
}

// fetch reads the JWK Set and, if it has at least one key, makes it the
// cache.
func (j *jwks) fetch(ctx context.Context) error {
	store, err := jwkset.NewStorageFromHTTP(j.url, jwkset.HTTPClientStorageOptions{
		Client: j.client, Ctx: ctx, HTTPTimeout: jwksFetchTimeout,
		// A refresh on an unknown key ID that fails keeps the cache; say so.
		RefreshErrorHandler: func(ctx context.Context, err error) {
			j.log.WarnContext(ctx, "presence: JWKS refresh for an unknown key ID failed; keeping the cached keys", "url", j.url, "err", fetchCause(err))
		},
	})
	if err != nil {
		return fmt.Errorf("server: cannot fetch the JWKS at %s: %s", j.url, fetchCause(err))
	}
	keys, err := store.KeyReadAll(ctx)
	if err != nil {
		return fmt.Errorf("server: JWKS at %s: %w", j.url, err)
	}
	if len(keys) == 0 {
		return fmt.Errorf("server: the JWKS at %s has no keys this server can use", j.url)
	}
	client, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs: map[string]jwkset.Storage{j.url: store},
		// No RateLimitWaitMax: the caller's context (jwksUnknownWait)
		// bounds both the wait for the limiter and the fetch.
		RefreshUnknownKID: j.unknown,
	})
	if err != nil {
		return fmt.Errorf("server: JWKS at %s: %w", j.url, err)
	}
	kf, err := keyfunc.New(keyfunc.Options{Storage: client, UseWhitelist: []jwkset.USE{jwkset.UseSig, ""}})
	if err != nil {
		return fmt.Errorf("server: JWKS at %s: %w", j.url, err)
	}
	j.kf.Store(&keyfuncBox{kf})
	return nil
}

// fetchCause is the innermost useful part of a fetch error: the HTTP
// client's ("dial tcp …: connection refused") or the library's last words.
func fetchCause(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	msg := err.Error()
	if i := strings.Index(msg, jwkset.ErrInvalidHTTPStatusCode.Error()); i >= 0 {
		return msg[i:] // "invalid HTTP status code: 404"
	}
	return msg
}

// run fetches the set every refresh interval until ctx ends. A failed fetch
// keeps the cached keys (an identity provider's outage must not lock every
// client out) and is logged.
func (j *jwks) run(ctx context.Context) {
	t := time.NewTicker(j.refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fctx, cancel := context.WithTimeout(ctx, jwksFetchTimeout)
		err := j.fetch(fctx)
		cancel()
		if err != nil && ctx.Err() == nil {
			j.log.WarnContext(ctx, "presence: JWKS refresh failed; keeping the cached keys", "url", j.url, "err", err)
		}
	}
}

// key returns the key for t, which the parser has already limited to
// jwksAlgs: the JWK of t's "kid" (or every key, for a token without one),
// only of the type t's algorithm needs.
func (j *jwks) key(ctx context.Context, t *jwt.Token) (any, error) {
	ctx, cancel := context.WithTimeout(ctx, jwksUnknownWait)
	defer cancel()
	k, err := j.kf.Load().kf.KeyfuncCtx(ctx)(t)
	if err != nil {
		if kid, ok := t.Header["kid"].(string); ok {
			j.log.DebugContext(ctx, "presence: no JWKS key for a token", "kid", kid, "err", err)
			if strings.Contains(err.Error(), `"alg" parameter`) { // keyfunc: the JWK's alg is not the token's
				return nil, fmt.Errorf("the JWKS key %q is not an %s key", kid, t.Method.Alg())
			}
			return nil, fmt.Errorf("no key %q in the JWKS", kid)
		}
		return nil, errors.New("no key in the JWKS")
	}
	alg := t.Method.Alg()
	if set, ok := k.(jwt.VerificationKeySet); ok {
		var fit jwt.VerificationKeySet
		for _, key := range set.Keys {
			if keyFits(alg, key) {
				fit.Keys = append(fit.Keys, key)
			}
		}
		if len(fit.Keys) == 0 {
			return nil, fmt.Errorf("no %s key in the JWKS", alg)
		}
		return fit, nil
	}
	if !keyFits(alg, k) {
		return nil, fmt.Errorf("the JWKS key %q is not an %s key", t.Header["kid"], alg)
	}
	return k, nil
}

// keyFits reports whether key is a public key of the type and size alg
// needs: RSA of 2048 bits or more for RS256, P-256 for ES256, Ed25519 for
// EdDSA.
func keyFits(alg string, key any) bool {
	switch k := key.(type) {
	case *rsa.PublicKey:
		return alg == "RS256" && k.N.BitLen() >= minRSABits
	case *ecdsa.PublicKey:
		return alg == "ES256" && k.Curve == elliptic.P256()
	case ed25519.PublicKey:
		return alg == "EdDSA" && len(k) == ed25519.PublicKeySize
	}
	return false
}
