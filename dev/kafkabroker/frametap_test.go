package kafkabroker

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestFrameTapDeliversWantedFramesWhateverTheChunks feeds a stream of
// size-prefixed frames in random pieces and checks that exactly the
// wanted frames come out, whole, including one too large to keep.
func TestFrameTapDeliversWantedFramesWhateverTheChunks(t *testing.T) {
	var stream []byte
	var want [][]byte
	for i := range 200 {
		n := 1 + rand.IntN(300)
		if i == 100 {
			n = maxGroupFrame + 1 // wanted, but never buffered
		}
		frame := make([]byte, n)
		for j := range frame {
			frame[j] = byte(rand.IntN(256))
		}
		frame[0] = byte(i % 3) // frames starting with 0 are wanted
		stream = binary.BigEndian.AppendUint32(stream, uint32(n))
		stream = append(stream, frame...)
		if frame[0] == 0 && n <= maxGroupFrame {
			want = append(want, frame)
		}
	}
	for round := range 20 {
		var got [][]byte
		tap := frameTap{
			headLen: 4,
			want:    func(head []byte) bool { return len(head) > 0 && head[0] == 0 },
			deliver: func(frame []byte) { got = append(got, bytes.Clone(frame)) },
		}
		for rest := stream; len(rest) > 0; {
			n := min(len(rest), 1+rand.IntN(64<<(round%12)))
			tap.feed(rest[:n])
			rest = rest[n:]
		}
		if len(got) != len(want) {
			t.Fatalf("round %d: %d frames delivered, want %d", round, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("round %d: frame %d differs", round, i)
			}
		}
	}
}
