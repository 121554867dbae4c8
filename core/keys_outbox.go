package core

// Outbox is the outbox hash of user bucket b (0 ≤ b < UserBuckets): the
// events its scripts decided and the engine has not yet acknowledged as
// delivered (docs/design.md §7). Besides one field per waiting event it
// holds two bookkeeping fields, "#" (the bucket's event counter) and "@"
// (the instant that counter started), so a bucket's waiting events are
// its HLEN less 2 (a missing key: none).
func (k KeyNames) Outbox(b int) string { return k.engine.settings.users[b].outbox }
