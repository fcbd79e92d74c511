package pause

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestBackoffDoublesUpToItsCap(t *testing.T) {
	var got []time.Duration
	for a := 1; a <= 6; a++ {
		got = append(got, Backoff(a, 25*time.Millisecond, 150*time.Millisecond))
	}
	want := []time.Duration{25, 50, 100, 150, 150, 150}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("Backoff = %v, want %v ms", got, want)
		}
	}
	for range 1000 {
		if j := Jittered(100 * time.Millisecond); j < 50*time.Millisecond || j >= 150*time.Millisecond {
			t.Fatalf("Jittered(100ms) = %v", j)
		}
	}
}

func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) || time.Since(start) > time.Second {
		t.Fatalf("Sleep on a cancelled context: %v after %v", err, time.Since(start))
	}
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatal(err)
	}
}
