package testenv

import (
	"math/rand/v2"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// KillRepeatedly kills the child that start starts with SIGKILL kills
// times, restarting it each time, while it works towards total
// (progress reports how far it is): each kill waits until the running
// child made progress (or 30 s), then a random moment up to 400 ms. It
// then waits (up to 3 minutes) for progress to reach total, fails tb
// unless most kills landed before that (work in flight), and returns the
// progress at each kill. The last child is killed when tb ends.
func KillRepeatedly(tb testing.TB, start func() *exec.Cmd, progress func() int64, total int64, kills int) []int64 {
	tb.Helper()
	child := start()
	tb.Cleanup(func() { _ = child.Process.Kill(); _, _ = child.Process.Wait() })
	began := time.Now()
	var killedAt []int64
	for range kills {
		before := progress()
		deadline := time.Now().Add(30 * time.Second)
		for progress() == before && progress() < total && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(time.Duration(rand.IntN(400)) * time.Millisecond)
		_ = child.Process.Signal(syscall.SIGKILL)
		_, _ = child.Process.Wait()
		killedAt = append(killedAt, progress())
		child = start()
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
