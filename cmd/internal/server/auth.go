package server

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/presencekit/presence/core"
	"github.com/presencekit/presence/internal/limits"
)

// ErrNoSecret is returned by New when neither a JWT secret nor a JWKS URL
// is configured and
// AuthConfig.InsecureDev is not set: the server does not start open by
// accident.
var ErrNoSecret = errors.New("server: no JWT secret or JWKS URL configured (set one, or run with --insecure-dev)")

// minSecretBytes is the shortest HS256 secret accepted (RFC 7518 section 3.2
// asks for a key at least as long as the hash output).
const minSecretBytes = 32

// AuthConfig configures how requests are authenticated.
//
// Clients present a JWT signed with HS256 and Secret, or with RS256, ES256
// or EdDSA and a key of the identity provider's JWK Set at JWKSURL, in the
// Authorization
// header ("Bearer TOKEN") or, where a browser cannot set headers (the
// event stream and the WebSocket), in the access_token query parameter.
// The token's subject ("sub") is the user: a client may heartbeat, log in
// and out, set its manual status and touch scopes only as itself. The
// token must carry an expiry ("exp").
//
// A token grants a permission named by a claim when the claim is true, or
// when the name is one of the space-separated words of the "scope" claim.
//
// A token may also carry the follow claim (FollowClaim, default
// "presence_follow"): a list of at most MaxFollow user IDs whose statuses
// and changes it may read, as a chat app's friend list, without the read
// claim (which also opens every user, "all=1" streams and scopes'
// members). A follow claim that is not such a list makes the token invalid.
//
// Secret and JWKSURL may be set together: the token's "alg" header picks
// the key, HS256 the secret and RS256, ES256 or EdDSA the JWK Set, so an
// identity provider's tokens and "presence serve token"'s both verify. No
// other algorithm is accepted, a JWK Set key only for its own algorithm
// (RSA of at least 2048 bits for RS256, P-256 for ES256, Ed25519 for
// EdDSA), and the secret never for a public-key algorithm nor a public key
// for HS256.
type AuthConfig struct {
	// Secret is the HS256 key, at least 32 bytes. Required unless InsecureDev.
	Secret []byte
	// JWKSURL is the https address of an identity provider's JSON Web Key
	// Set (http only on loopback). New fetches it and fails if it cannot;
	// Run fetches it again every JWKSRefresh; a token whose "kid" is not in
	// the cached set makes it fetched at once, at most once per
	// JWKSUnknownKIDInterval. A fetch replaces the whole set, so a key the
	// provider removed stops verifying; a failed refresh keeps the cached
	// set (and is logged).
	JWKSURL string
	// JWKSRefresh is how often Run fetches the JWK Set. Default 15 min.
	JWKSRefresh time.Duration
	// JWKSUnknownKIDInterval is the least time between two fetches caused
	// by tokens naming unknown key IDs. Default 1 min.
	JWKSUnknownKIDInterval time.Duration
	// JWKSClient fetches the JWK Set. Default: a client with a 10 s timeout.
	JWKSClient *http.Client
	// InsecureDev accepts every request without a token, as an admin. For
	// local development only; the server logs a warning at start-up and
	// every response carries "X-Presence-Insecure: 1".
	InsecureDev bool
	// ReadClaim is the permission to read other users' statuses, their
	// change events and scope members. Default "presence_read".
	ReadClaim string
	// FollowClaim names the claim listing the users a token may read
	// (statuses, stream changes) besides its own subject. Default
	// "presence_follow".
	FollowClaim string
	// MaxFollow is the most user IDs a follow claim may list. Default
	// 1,000 (core.MaxBatch); a token listing more is refused.
	MaxFollow int
	// AdminClaim is the permission to act as any user and to use the admin
	// endpoints, the gateway kick streams and the dashboard's data.
	// It implies ReadClaim. Default "presence_admin".
	AdminClaim string
	// ServiceClaim is the permission to act as any user (heartbeats,
	// logins, manual statuses, touches and leaves for others, as a gateway
	// does), without the admin endpoints. Default "presence_service".
	ServiceClaim string
	// Issuer and Audience, when set, must match the token's "iss" and "aud".
	Issuer   string
	Audience string
	// Leeway is the clock skew allowed between the token's issuer and this
	// host when checking "exp" and "nbf": a token is accepted until Leeway
	// after its expiry, and from Leeway before its "nbf". Default 30 s;
	// negative: none (a token is refused from the second it expires).
	Leeway time.Duration
}

// Principal is who made a request.
type Principal struct {
	// User is the token's subject; "" for insecure-dev requests without one.
	User string
	// Read allows reading other users' statuses and events.
	Read bool
	// Follows are the users the token's follow claim lets it read.
	Follows map[string]bool
	// Service allows acting as any user.
	Service bool
	// Admin allows everything.
	Admin bool

	claims jwt.MapClaims // the token's, for Config.ClassClaims
}

// granted reports whether the caller's token grants claim (an admin has
// every claim).
func (p Principal) granted(claim string) bool {
	return p.Admin || hasClaim(p.claims, claim)
}

type principalKey struct{}

func withPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

func principalFrom(ctx context.Context) Principal {
	p, _ := ctx.Value(principalKey{}).(Principal)
	return p
}

// actAs returns the user a write is for: given (a user ID, checkUser), or
// the caller when empty. Acting as another user needs an admin or service
// token.
func (p Principal) actAs(field, given string) (string, *Error) {
	switch {
	case given == "" && p.User == "":
		return "", fieldErr(field, "required (the request has no token whose subject could stand in)")
	case given == "":
		return p.User, nil
	}
	if e := checkUser(field, given); e != nil {
		return "", e
	}
	if given != p.User && !p.Admin && !p.Service {
		return "", forbidden("a token for %q cannot act as %q", p.User, given)
	}
	return given, nil
}

// canRead reports whether the caller may read user's status and events:
// its own, a followed user's (the follow claim), or anyone's with the read
// claim.
func (p Principal) canRead(user string) bool {
	return p.Admin || p.Read || (p.User != "" && p.User == user) || p.Follows[user]
}

// readRefused is the refusal of a read of another user's status or
// events: the claims that would allow it.
func (a *authenticator) readRefused(field string) *Error {
	return forbidden("%sreading another user needs the %q claim, or a %q claim that lists the user", field, a.cfg.ReadClaim, a.cfg.FollowClaim)
}

// fullView reports whether the caller sees user's manual status and devices.
func (p Principal) fullView(user string) bool {
	return p.Admin || (p.User != "" && p.User == user)
}

type authenticator struct {
	cfg    AuthConfig
	parser *jwt.Parser
	jwks   *jwks // nil without JWKSURL
}

func newAuthenticator(cfg AuthConfig, log *slog.Logger) (*authenticator, error) {
	if cfg.ReadClaim == "" {
		cfg.ReadClaim = "presence_read"
	}
	if cfg.AdminClaim == "" {
		cfg.AdminClaim = "presence_admin"
	}
	if cfg.FollowClaim == "" {
		cfg.FollowClaim = "presence_follow"
	}
	if cfg.MaxFollow == 0 {
		cfg.MaxFollow = core.MaxBatch
	}
	if cfg.MaxFollow < 0 {
		return nil, errors.New("server: negative MaxFollow")
	}
	if cfg.ServiceClaim == "" {
		cfg.ServiceClaim = "presence_service"
	}
	switch {
	case cfg.Leeway == 0:
		cfg.Leeway = 30 * time.Second
	case cfg.Leeway < 0:
		cfg.Leeway = 0
	}
	if cfg.JWKSRefresh == 0 {
		cfg.JWKSRefresh = 15 * time.Minute
	}
	if cfg.JWKSUnknownKIDInterval == 0 {
		cfg.JWKSUnknownKIDInterval = time.Minute
	}
	if cfg.JWKSRefresh < 0 || cfg.JWKSUnknownKIDInterval < 0 {
		return nil, errors.New("server: negative JWKS intervals")
	}
	if len(cfg.Secret) == 0 && cfg.JWKSURL == "" && !cfg.InsecureDev {
		return nil, ErrNoSecret
	}
	if len(cfg.Secret) > 0 && len(cfg.Secret) < minSecretBytes {
		return nil, errors.New("server: the JWT secret must be at least 32 bytes")
	}
	a := &authenticator{cfg: cfg}
	var methods []string
	if len(cfg.Secret) > 0 {
		methods = append(methods, jwt.SigningMethodHS256.Alg())
	}
	if cfg.JWKSURL != "" {
		j, err := newJWKS(cfg, log)
		if err != nil {
			return nil, err
		}
		a.jwks = j
		methods = append(methods, jwksAlgs...)
	}
	opts := []jwt.ParserOption{jwt.WithValidMethods(methods),
		jwt.WithLeeway(cfg.Leeway), jwt.WithExpirationRequired()}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Audience != "" {
		opts = append(opts, jwt.WithAudience(cfg.Audience))
	}
	a.parser = jwt.NewParser(opts...)
	return a, nil
}

// keyFor returns the key that verifies t (whose algorithm the parser has
// checked against the configured ones): the secret for HS256, the JWK Set
// for the others.
func (a *authenticator) keyFor(ctx context.Context) jwt.Keyfunc {
	return func(t *jwt.Token) (any, error) {
		if t.Method.Alg() == jwt.SigningMethodHS256.Alg() {
			if len(a.cfg.Secret) == 0 {
				return nil, errors.New("HS256 tokens are not accepted")
			}
			return a.cfg.Secret, nil
		}
		if a.jwks == nil {
			return nil, fmt.Errorf("%s tokens are not accepted", t.Method.Alg())
		}
		return a.jwks.key(ctx, t)
	}
}

// authenticate returns the request's principal. queryToken allows the
// access_token parameter (streams only: it may end up in access logs
// elsewhere).
func (a *authenticator) authenticate(r *http.Request, queryToken bool) (Principal, *Error) {
	raw := ""
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
			return Principal{}, apiErr(http.StatusUnauthorized, CodeUnauthenticated, "the Authorization header must be \"Bearer TOKEN\"")
		}
		raw = strings.TrimSpace(tok)
	} else if queryToken {
		raw = r.URL.Query().Get("access_token")
	}
	if a.cfg.InsecureDev && (raw == "" || (len(a.cfg.Secret) == 0 && a.jwks == nil)) {
		return Principal{Admin: true, Read: true}, nil
	}
	if raw == "" {
		return Principal{}, apiErr(http.StatusUnauthorized, CodeUnauthenticated, "a bearer token is required")
	}
	claims := jwt.MapClaims{}
	if _, err := a.parser.ParseWithClaims(raw, claims, a.keyFor(r.Context())); err != nil {
		return Principal{}, apiErr(http.StatusUnauthorized, CodeUnauthenticated, "invalid token: %v", err)
	}
	sub, err := claims.GetSubject()
	if err != nil || sub == "" || len(sub) > limits.IDBytes {
		return Principal{}, apiErr(http.StatusUnauthorized, CodeUnauthenticated, "the token's subject must be a user ID of 1 to %d bytes", limits.IDBytes)
	}
	if e := rawSubject(raw); e != nil {
		return Principal{}, e
	}
	if e := checkUser("sub", sub); e != nil {
		return Principal{}, e
	}
	p := Principal{User: sub, Admin: hasClaim(claims, a.cfg.AdminClaim), claims: claims}
	p.Service = hasClaim(claims, a.cfg.ServiceClaim)
	p.Read = p.Admin || hasClaim(claims, a.cfg.ReadClaim)
	var e *Error
	if p.Follows, e = a.follows(claims); e != nil {
		return Principal{}, e
	}
	return p, nil
}

// follows reads the follow claim: absent, or a list of at most MaxFollow
// valid user IDs.
func (a *authenticator) follows(claims jwt.MapClaims) (map[string]bool, *Error) {
	v, ok := claims[a.cfg.FollowClaim]
	if !ok {
		return nil, nil
	}
	name := a.cfg.FollowClaim
	list, ok := v.([]any)
	if !ok {
		return nil, apiErr(http.StatusUnauthorized, CodeUnauthenticated, "the token's %q claim must be a list of user IDs", name)
	}
	if len(list) > a.cfg.MaxFollow {
		return nil, apiErr(http.StatusUnauthorized, CodeUnauthenticated, "the token's %q claim lists %d users; at most %d are allowed", name, len(list), a.cfg.MaxFollow)
	}
	out := make(map[string]bool, len(list))
	for i, u := range list {
		id, ok := u.(string)
		if !ok {
			return nil, apiErr(http.StatusUnauthorized, CodeUnauthenticated, "the token's %q claim must be a list of user IDs: item %d is not a string", name, i)
		}
		if e := checkUser(fmt.Sprintf("%s[%d]", name, i), id); e != nil {
			e.Status, e.Code = http.StatusUnauthorized, CodeUnauthenticated
			return nil, e
		}
		out[id] = true
	}
	return out, nil
}

// rawSubject refuses a verified token whose "sub", as its issuer wrote it,
// holds bytes that are not UTF-8 or an unpaired surrogate escape: the JSON
// decoder would have turned them into U+FFFD, and two such subjects into
// one user (docs/design.md §3).
func rawSubject(token string) *Error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil // the parser has verified it: no such token gets here
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return nil
	}
	var c struct {
		Sub json.RawMessage `json:"sub"`
	}
	if json.Unmarshal(payload, &c) != nil {
		return nil
	}
	if at, what := badText(c.Sub); at >= 0 {
		return fieldErr("sub", "the token's subject %s at byte %d", what, at)
	}
	return nil
}

// hasClaim reports whether claims grant name: claims[name] is true, or
// name is a word of the "scope" claim (a space-separated string or a list).
func hasClaim(claims jwt.MapClaims, name string) bool {
	if v, ok := claims[name].(bool); ok && v {
		return true
	}
	switch s := claims["scope"].(type) {
	case string:
		for _, w := range strings.Fields(s) {
			if w == name {
				return true
			}
		}
	case []any:
		for _, w := range s {
			if w == name {
				return true
			}
		}
	}
	return false
}

// TokenOptions says what NewToken puts in a token.
type TokenOptions struct {
	User string        // the subject
	TTL  time.Duration // lifetime; default 1 h
	// Claims are the permissions to grant, such as "presence_admin".
	Claims []string
	// Follow, when not nil, is the follow claim ("presence_follow"): the
	// users the token may read besides its subject.
	Follow   []string
	Issuer   string
	Audience string
	// Now is the issue time; default time.Now().
	Now time.Time
}

// NewToken returns an HS256 JWT for o.User signed with secret, granting
// o.Claims (each set to true). It is what "presence serve token" prints,
// for trying the API and for tests.
func NewToken(secret []byte, o TokenOptions) (string, error) {
	if o.User == "" {
		return "", errors.New("server: a token needs a user")
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	ttl := o.TTL
	if ttl == 0 {
		ttl = time.Hour
	}
	claims := jwt.MapClaims{"sub": o.User, "iat": now.Unix(), "exp": now.Add(ttl).Unix()}
	if o.Issuer != "" {
		claims["iss"] = o.Issuer
	}
	if o.Audience != "" {
		claims["aud"] = o.Audience
	}
	for _, c := range o.Claims {
		if c == "sub" || c == "exp" || c == "iat" || c == "iss" || c == "aud" {
			return "", errors.New("server: claim " + c + " is reserved")
		}
		claims[c] = true
	}
	if o.Follow != nil {
		claims["presence_follow"] = o.Follow
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}
