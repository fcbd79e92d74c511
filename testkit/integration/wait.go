package integration

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// DefaultHangAfter is how long a wait may see no progress before it
// fails the test, unless EnvHangAfter says otherwise: far longer than
// any step takes on a loaded machine several times slower than CI, so
// that only a real hang reaches it.
const DefaultHangAfter = 3 * time.Minute

// EnvHangAfter names the variable that overrides DefaultHangAfter: a Go
// duration such as 10m or 30s.
const EnvHangAfter = "EVENTPIPE_TEST_HANG_AFTER"

// HangAfter is how long a wait may see no progress before it fails the
// test: EnvHangAfter when it is set, DefaultHangAfter otherwise. It
// panics when EnvHangAfter is not a positive Go duration.
func HangAfter() time.Duration {
	v := os.Getenv(EnvHangAfter)
	if v == "" {
		return DefaultHangAfter
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		panic(fmt.Sprintf("integration: %s=%q is not a positive Go duration such as 10m or 30s", EnvHangAfter, v))
	}
	return d
}

// Await calls check until it returns nil, every 10 ms at first and then
// less and less often, up to every 250 ms. When HangAfter passes without
// success it fails tb, naming what it waited for, how long it waited and
// the last error check returned: let that error say how far things got.
func Await(tb testing.TB, what string, check func() error) {
	tb.Helper()
	hang := HangAfter()
	start := time.Now()
	for interval := 10 * time.Millisecond; ; interval = nextInterval(interval) {
		err := check()
		if err == nil {
			return
		}
		if waited := time.Since(start); waited >= hang {
			tb.Fatalf("%s: still not done after %v (%s=%v); last: %v", what, waited.Round(time.Millisecond), EnvHangAfter, hang, err)
		}
		time.Sleep(interval)
	}
}

// AwaitProgress waits until progress reaches total, and returns how long
// that took. It polls progress as Await polls its check, and fails tb
// only when progress did not move for HangAfter, however long the whole
// wait takes, saying what it waited for, the progress reached, total and
// how long it was stuck there.
func AwaitProgress(tb testing.TB, what string, progress func() int64, total int64) time.Duration {
	tb.Helper()
	hang := HangAfter()
	start := time.Now()
	last, moved := progress(), start
	for interval := 10 * time.Millisecond; last < total; interval = nextInterval(interval) {
		time.Sleep(interval)
		if n := progress(); n != last {
			last, moved = n, time.Now()
			continue
		}
		if stuck := time.Since(moved); stuck >= hang {
			tb.Fatalf("%s: progress %d of %d, stuck there for %v (%v in all; %s=%v)", what, last, total,
				stuck.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), EnvHangAfter, hang)
		}
	}
	return time.Since(start)
}

// nextInterval is the polling interval after interval: 50% longer, up
// to 250 ms.
func nextInterval(interval time.Duration) time.Duration {
	return min(interval*3/2, 250*time.Millisecond)
}
