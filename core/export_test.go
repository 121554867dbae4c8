package core

// GroupQueued is how many calls wait in e's group commit queue.
func GroupQueued(e *Engine) int {
	e.comb.mu.Lock()
	defer e.comb.mu.Unlock()
	return len(e.comb.queue)
}
