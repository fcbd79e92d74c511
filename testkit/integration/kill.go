package integration

import (
	"fmt"
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
// progress, then a random moment up to 400 ms. It then waits for
// progress to reach total, fails tb unless most kills landed before that
// (with work in flight), and returns the progress at each kill. p is
// left running. Its waits fail tb only when progress does not move for
// HangAfter (AwaitProgress), saying where it stopped and where the kills
// landed.
func KillRepeatedly(tb testing.TB, p Process, progress func() int64, total int64, kills int) []int64 {
	tb.Helper()
	began := time.Now()
	var killedAt []int64
	for i := range kills {
		before := progress()
		Await(tb, fmt.Sprintf("progress before kill %d of %d (kills so far at %v)", i+1, kills, killedAt), func() error {
			if n := progress(); n == before && n < total {
				return fmt.Errorf("progress still %d of %d", n, total)
			}
			return nil
		})
		time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
		p.Kill()
		killedAt = append(killedAt, progress())
		p.Start()
	}
	lastKill := time.Now()
	AwaitProgress(tb, fmt.Sprintf("work after %d kills at %v", kills, killedAt), progress, total)
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
