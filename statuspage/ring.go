package statuspage

// ring keeps the last cap(buf) values pushed, overwriting the oldest. It
// is not safe for concurrent use; Page guards it.
type ring[T any] struct {
	buf  []T
	next int // where the next push goes
	full bool
}

func newRing[T any](size int) *ring[T] { return &ring[T]{buf: make([]T, size)} }

func (r *ring[T]) push(v T) {
	r.buf[r.next] = v
	r.next = (r.next + 1) % len(r.buf)
	if r.next == 0 {
		r.full = true
	}
}

// values returns a copy of the values kept, oldest first.
func (r *ring[T]) values() []T {
	if !r.full {
		return append([]T(nil), r.buf[:r.next]...)
	}
	out := make([]T, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}
