package commands

import "sync"

// Waiters hands answers to the callers waiting for them, by command id:
// a Sender's replies reader calls Deliver with each Result it reads, and
// SendAndWait registers with Wait before it publishes, so no answer can be
// missed. The zero value is ready to use; it is safe for concurrent use.
type Waiters struct {
	mu sync.Mutex
	m  map[string]chan Result
}

// Wait registers a waiter for commandID and returns the channel its
// answer arrives on and the function that removes the waiter.
func (w *Waiters) Wait(commandID string) (<-chan Result, func()) {
	ch := make(chan Result, 1)
	w.mu.Lock()
	if w.m == nil {
		w.m = map[string]chan Result{}
	}
	w.m[commandID] = ch
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		delete(w.m, commandID)
		w.mu.Unlock()
	}
}

// Waiting reports whether a caller waits for commandID, so that a reader
// can skip decoding the other answers.
func (w *Waiters) Waiting(commandID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.m[commandID] != nil
}

// Deliver hands res to the caller waiting for its command, if any; a
// second answer to the same command (a redelivery) is dropped.
func (w *Waiters) Deliver(res Result) {
	w.mu.Lock()
	ch := w.m[res.CommandID]
	w.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case ch <- res:
	default: // a redelivered result; the first one was taken
	}
}
