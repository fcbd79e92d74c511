// Package pause is how eventpipe waits between retries: a sleep that ends
// with its context, and a capped exponential backoff with jitter.
package pause

import (
	"context"
	"math/rand/v2"
	"time"
)

// Sleep waits d, or until ctx ends and then returns ctx's error.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Backoff is the pause before retry attempt (1, 2, …): base, doubled for
// each later attempt, at most max.
func Backoff(attempt int, base, max time.Duration) time.Duration {
	d := base
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// Jittered spreads d uniformly over [d/2, 3d/2), so that retries of
// many callers do not fall in step.
func Jittered(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d/2 + rand.N(d)
}
