package core

// GroupQueued is how many calls wait in e's group commit queue.
func GroupQueued(e *Engine) int {
	e.comb.mu.Lock()
	defer e.comb.mu.Unlock()
	return len(e.comb.queue)
}

// PageOf is the page of user at level, split pointer split (userPage).
func PageOf(user string, level, split int) int {
	return int(userPage(user, uint(level), uint32(split)))
}

// LogChunk is the most events one change log append carries (logChunk).
const LogChunk = logChunk
