package batcher

// Queued is how many beats wait for a sender.
func Queued(b *Batcher) int { return len(b.queue) }
