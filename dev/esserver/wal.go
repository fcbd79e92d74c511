package esserver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// The write-ahead log is a sequence of generation files wal-<gen>.log in the
// state directory. Each record is framed as
//
//	uint32 little-endian payload length | uint32 CRC-32C of payload | payload
//
// Writers append under a mutex and then wait until a group commit has
// written and fsynced everything up to their record (leader/follower: the
// first waiter writes and syncs the whole pending buffer for everybody).
// Positions are logical byte offsets that keep growing across generations.

var crcTable = crc32.MakeTable(crc32.Castagnoli)

const frameHeader = 8

type wal struct {
	dir string

	mu       sync.Mutex
	cond     *sync.Cond
	f        *os.File
	gen      uint64
	buf      []byte // appended but not yet written
	spare    []byte
	appended int64 // logical end of appended records
	synced   int64 // logical end of durable records
	syncing  bool
	err      error // sticky write/sync failure
	genBytes int64 // bytes appended to the current generation
	closed   bool
}

func walName(gen uint64) string { return fmt.Sprintf("wal-%016d.log", gen) }

func snapName(gen uint64) string { return fmt.Sprintf("snapshot-%016d.dat", gen) }

// parseGen extracts the generation from names like prefix-<gen>.ext.
func parseGen(name, prefix, ext string) (uint64, bool) {
	if !strings.HasPrefix(name, prefix) || !strings.HasSuffix(name, ext) {
		return 0, false
	}
	g, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, prefix), ext), 10, 64)
	return g, err == nil
}

// listGens returns the sorted generations of files with prefix/ext in dir.
func listGens(dir, prefix, ext string) ([]uint64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var gens []uint64
	for _, e := range ents {
		if g, ok := parseGen(e.Name(), prefix, ext); ok {
			gens = append(gens, g)
		}
	}
	sort.Slice(gens, func(i, j int) bool { return gens[i] < gens[j] })
	return gens, nil
}

// openWAL starts a new generation file gen in dir.
func openWAL(dir string, gen uint64) (*wal, error) {
	w := &wal{dir: dir}
	w.cond = sync.NewCond(&w.mu)
	f, err := createSynced(dir, walName(gen))
	if err != nil {
		return nil, err
	}
	w.f, w.gen = f, gen
	return w, nil
}

// createSynced creates (truncating) a file and fsyncs the directory so the
// new name is durable.
func createSynced(dir, name string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}

func appendFrame(dst, payload []byte) []byte {
	var hdr [frameHeader]byte
	binary.LittleEndian.PutUint32(hdr[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(hdr[4:8], crc32.Checksum(payload, crcTable))
	dst = append(dst, hdr[:]...)
	return append(dst, payload...)
}

// append adds one record and returns the logical position its durability
// must reach. It does not wait.
func (w *wal) append(payload []byte) (int64, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	if w.closed {
		return 0, errors.New("write-ahead log is closed")
	}
	w.buf = appendFrame(w.buf, payload)
	n := int64(frameHeader + len(payload))
	w.appended += n
	w.genBytes += n
	return w.appended, nil
}

// end is the logical position after the last appended record.
func (w *wal) end() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.appended
}

// waitDurable blocks until every record up to pos is written and fsynced.
func (w *wal) waitDurable(pos int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.waitDurableLocked(pos)
}

func (w *wal) waitDurableLocked(pos int64) error {
	for w.synced < pos {
		if w.err != nil {
			return w.err
		}
		if w.syncing {
			w.cond.Wait()
			continue
		}
		w.syncing = true
		data, end, f := w.buf, w.appended, w.f
		w.buf = w.spare[:0]
		w.mu.Unlock()
		_, err := f.Write(data)
		if err == nil {
			err = f.Sync()
		}
		w.mu.Lock()
		w.spare = data[:0]
		w.syncing = false
		if err != nil {
			w.err = fmt.Errorf("write-ahead log %s: %w", walName(w.gen), err)
		} else {
			w.synced = end
		}
		w.cond.Broadcast()
	}
	return w.err
}

// rotate makes everything durable and starts generation gen. Callers must
// prevent concurrent appends.
func (w *wal) rotate(gen uint64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.waitDurableLocked(w.appended); err != nil {
		return err
	}
	f, err := createSynced(w.dir, walName(gen))
	if err != nil {
		return err
	}
	old := w.f
	w.f, w.gen, w.genBytes = f, gen, 0
	if err := old.Close(); err != nil {
		return fmt.Errorf("close %s: %w", old.Name(), err)
	}
	return nil
}

// size is the number of bytes appended to the current generation.
func (w *wal) size() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.genBytes
}

func (w *wal) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	err := w.waitDurableLocked(w.appended)
	w.closed = true
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close write-ahead log: %w", cerr)
	}
	return err
}

// readFrames calls fn for each intact record of the file at path. It returns
// the offset after the last intact record and whether the file ended with a
// torn or corrupt record.
func readFrames(path string, fn func(payload []byte) error) (valid int64, torn bool, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, false, fmt.Errorf("read %s: %w", path, err)
	}
	off := 0
	for off < len(data) {
		if len(data)-off < frameHeader {
			return int64(off), true, nil
		}
		n := int(binary.LittleEndian.Uint32(data[off : off+4]))
		sum := binary.LittleEndian.Uint32(data[off+4 : off+8])
		if n > len(data)-off-frameHeader {
			return int64(off), true, nil
		}
		payload := data[off+frameHeader : off+frameHeader+n]
		if crc32.Checksum(payload, crcTable) != sum {
			return int64(off), true, nil
		}
		if err := fn(payload); err != nil {
			return int64(off), false, fmt.Errorf("%s at offset %d: %w", filepath.Base(path), off, err)
		}
		off += frameHeader + n
	}
	return int64(off), false, nil
}

// truncateFile cuts a torn tail off a log file and syncs it.
func truncateFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("truncate %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	return nil
}

// Record payload encoding helpers.

type encoder struct{ b []byte }

func (e *encoder) byte1(v byte)     { e.b = append(e.b, v) }
func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) bytes(v []byte)   { e.uvarint(uint64(len(v))); e.b = append(e.b, v...) }
func (e *encoder) str(v string)     { e.uvarint(uint64(len(v))); e.b = append(e.b, v...) }

type decoder struct {
	b   []byte
	err error
}

var errShortRecord = errors.New("record too short")

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShortRecord
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errShortRecord
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if uint64(len(d.b)) < n {
		d.err = errShortRecord
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string { return string(d.bytes()) }
