package integration

import (
	"math/rand/v2"
	"testing"
	"time"
)

// Process is what KillRepeatedly kills and starts again: a *Child, or
// anything else that can.
type Process interface {
	// Kill kills the process with SIGKILL and waits until it is gone.
	Kill()
	// Start starts it again.
	Start()
}

// KillRepeatedly kills the running process p with SIGKILL kills times,
// starting it again each time, while it works towards total (progress
// reports how far it is): each kill waits until the running process made
// progress (or 30 s), then a random moment up to 400 ms. It then waits (up
// to 3 minutes) for progress to reach total, fails tb unless most kills
// landed before that (with work in flight), and returns the progress at
// each kill. p is left running.
func KillRepeatedly(tb testing.TB, p Process, progress func() int64, total int64, kills int) []int64 {
	tb.Helper()
	began := time.Now()
	var killedAt []int64
	for range kills {
		before := progress()
		deadline := time.Now().Add(30 * time.Second)
		for progress() == before && progress() < total && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
		p.Kill()
		killedAt = append(killedAt, progress())
		p.Start()
	}
	lastKill := time.Now()
	deadline := lastKill.Add(3 * time.Minute)
	for progress() < total {
		if time.Now().After(deadline) {
			tb.Fatalf("progress %d of %d, 3 minutes after %d kills at %v", progress(), total, kills, killedAt)
		}
		time.Sleep(200 * time.Millisecond)
	}
	tb.Logf("%d kills at progress %v of %d, over %v; the rest took %v", kills, killedAt, total,
		lastKill.Sub(began).Round(time.Millisecond), time.Since(lastKill).Round(time.Millisecond))
	inFlight := 0
	for _, n := range killedAt {
		if n < total {
			inFlight++
		}
	}
	if inFlight*2 <= kills {
		tb.Errorf("only %d of %d kills landed before the work was done (%v of %d): the kills did not hit work in flight", inFlight, kills, killedAt, total)
	}
	return killedAt
}
