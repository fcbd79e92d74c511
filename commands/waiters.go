package commands

import "sync"

// Waiters hands answers to the callers waiting for them, by command id:
// a Sender's replies reader calls Deliver with each Result it reads, and
// SendAndWait registers with Wait before it publishes, so no answer can be
// missed. The zero value is ready to use; it is safe for concurrent use.
type Waiters struct {
	mu sync.Mutex
	m  map[string]waiter
}

// waiter is one caller waiting: its channel and the check an answer must
// pass (nil: none).
type waiter struct {
	ch     chan Result
	accept func(Result) bool
}

// Wait registers a waiter for commandID and returns the channel its
// answer arrives on and the function that removes the waiter.
func (w *Waiters) Wait(commandID string) (<-chan Result, func()) {
	return w.WaitFor(commandID, nil)
}

// WaitFor is Wait taking only an answer accept returns true for (nil:
// any): a sender that signed its command takes only the answer signed
// for it (VerifyResult), and every other answer with its id is dropped.
func (w *Waiters) WaitFor(commandID string, accept func(Result) bool) (<-chan Result, func()) {
	ch := make(chan Result, 1)
	w.mu.Lock()
	if w.m == nil {
		w.m = map[string]waiter{}
	}
	w.m[commandID] = waiter{ch: ch, accept: accept}
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
	return w.m[commandID].ch != nil
}

// Deliver hands res to the caller waiting for its command, if any and
// if the caller accepts it (WaitFor); a second answer to the same command
// (a redelivery) is dropped. It reports whether res was handed over.
func (w *Waiters) Deliver(res Result) bool {
	w.mu.Lock()
	wt := w.m[res.CommandID]
	w.mu.Unlock()
	if wt.ch == nil || (wt.accept != nil && !wt.accept(res)) {
		return false
	}
	select {
	case wt.ch <- res:
		return true
	default: // a redelivered result; the first one was taken
		return false
	}
}
