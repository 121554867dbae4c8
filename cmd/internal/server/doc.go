// Package server is the reference presence service: a versioned JSON API
// over a core.Engine, live events over Server-Sent Events and WebSocket, a
// dashboard, and the operational endpoints. "presence serve" runs it;
// cmd/internal/server/README.md walks through the API with curl.
//
// A program builds it over any core.Store and serves it:
//
//	srv, err := server.New(goredis.New(client), server.Config{
//		Auth: server.AuthConfig{Secret: secret},
//	})
//	if err != nil { … }
//	err = srv.Serve(ctx, listener) // until ctx ends, then a graceful shutdown
//
// or mounts srv.Handler() in a server of its own and runs srv.Run(ctx)
// beside it (the event hub, the sweeper and the dashboard's refreshes).
//
// # Endpoints
//
//	POST /v1/heartbeat                      one heartbeat (HeartbeatRequest)
//	POST /v1/heartbeats                     up to 1,000 (HeartbeatsRequest); one Ack each
//	POST /v1/login                          LoginRequest → token and kicked sessions
//	POST /v1/logout, /v1/disconnect         LogoutRequest
//	PUT  /v1/users/{user}/manual            ManualRequest (NONE, DND, INVISIBLE)
//	GET  /v1/users/{user}/status            UserStatus
//	POST /v1/statuses                       StatusesRequest → statuses in order
//	POST /v1/scopes/{class}/{id}/touch      MemberRequest (member defaults to the caller)
//	POST /v1/scopes/{class}/{id}/leave      MemberRequest
//	GET  /v1/scopes/{class}/{id}/count      CountResponse
//	GET  /v1/scopes/{class}/{id}/members    ?cursor=&limit= → MembersResponse (read claim)
//	GET  /v1/events                         Server-Sent Events (see below)
//	GET  /v1/ws                             the same events over a WebSocket (WSMessage)
//	GET  /v1/admin/sweeper                  the sweeper's last reports (admin)
//	GET  /v1/admin/overview                 the dashboard's data (admin)
//	GET  /v1/history                        ?from=&to=&step=&scope= → HistoryResponse (admin; Config.History)
//	GET  /v1/info                           timings and auth mode (no token; Redis named to admins)
//	GET  /healthz, /readyz                  liveness, readiness (Redis answers)
//	GET  /metrics                           Prometheus (admin; or AdminHandler without a token)
//	GET  /dashboard/                        the dashboard
//
// # Errors
//
// Every error is JSON, {"error":{"code":…,"message":…,"field":…}}, with a
// stable code (the Code constants, each with its HTTP status); bad input
// is a 400 whose field names the JSON field or parameter at fault, such
// as "device" or "beats[3].kind".
//
// # Authentication
//
// See AuthConfig: a JWT whose subject is the user, signed with HS256 and a
// shared secret, or with RS256, ES256 or EdDSA and a key of an identity
// provider's JWK Set (AuthConfig.JWKSURL: fetched by New, refreshed by Run
// every JWKSRefresh and at once for an unknown "kid", rate-limited; the
// token's "alg" picks the secret or the set when both are configured;
// package github.com/MicahParks/keyfunc/v3 reads the set). A client acts only
// as itself (in scopes: its user ID, or USER/DEVICE for a live device of
// its own in Config.DeviceClasses, split at the first "/", so a user ID
// never contains "/": a 400 invalid_field wherever one is read, a token's
// subject included); reading others needs the read claim, or for the
// users it lists the follow claim (AuthConfig.FollowClaim);
// acting for others needs the service or the admin claim; admin endpoints,
// /metrics and gateway kick streams need the admin claim. Without a secret
// or a JWKS URL New refuses to build a server unless AuthConfig.InsecureDev
// is set; with a JWKS URL it cannot fetch, New fails with an error naming
// the URL and the cause.
//
// # Limits
//
// HTTPServer (what Serve runs) has the read-header, read (body), write and
// idle deadlines of Config; the streams clear them. Every state-changing
// request must be application/json (415), a foreign Origin is refused
// (403) unless in Config.CORSOrigins, which also get preflight answers.
// Per-user budgets (heartbeats, touches, reads, stream opens), a budget
// per client address for requests without a valid token, and caps on
// streams per user and per instance answer 429 with Retry-After.
// cmd/internal/server/README.md, "Deploying", lists them with their flags.
//
// # Events
//
// GET /v1/events streams the status changes of the users asked for
// (user=ID, repeatable; all=1 with the read claim), the kicks addressed to
// gateway=ID (admin), and with sweeps=1 this instance's sweep reports
// (admin). Each change and kick carries its change log ID as the SSE id; a
// client that reconnects with Last-Event-ID (EventSource does so itself)
// first receives the changes and kicks it missed, read from the change log that the
// engine keeps in a Redis stream (Config.Engine.ChangeLog entries), so
// any instance can resume any client. If the log no longer reaches back
// that far, a "reset" event says so and the asked users' statuses follow.
// A loss of Redis's data (docs/design.md §11) is one "loss" event instead,
// after which no change comes until the loss has healed.
//
// Live delivery: one hub per instance reads the change log in order, woken
// by the engine's pub/sub Feed and by a timer, and fans entries out to the
// streams; a stream that falls StreamBuffer events behind is ended with a
// "bye" event and resumes from the log when its client reconnects.
//
// # Online users by status
//
// The dashboard's counts come from what the instance can see without
// scanning the keyspace: the change log (read whole at start-up, then
// entry by entry), the users whose heartbeats, logins or status reads pass
// through it, and a periodic Statuses re-read of all of those (which drops
// anyone who went offline unseen). A user online since before the oldest
// kept log entry who never touches this instance is not counted. The
// hottest scopes are likewise the scopes touched through this instance,
// counted with Engine.Count.
package server
