package esserver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
)

// Record kinds of the write-ahead log and of snapshots (a snapshot is a
// compacted log: the records that rebuild the state at its generation).
const (
	recCreateIndex byte = 1
	recDeleteIndex byte = 2
	recMapping     byte = 3
	recSettings    byte = 4
	recAliases     byte = 5
	recIndexDoc    byte = 6
	recDeleteDoc   byte = 7
	recIndexState  byte = 8
	recSnapshotEnd byte = 9
	// recClusterSettings holds all persistent cluster settings (Settings),
	// replacing the previous ones.
	recClusterSettings byte = 10
)

// metaRecord is the JSON payload of the metadata records.
type metaRecord struct {
	Name          string                          `json:"name,omitempty"`
	UUID          string                          `json:"uuid,omitempty"`
	Created       int64                           `json:"created,omitempty"`
	Settings      map[string]string               `json:"settings,omitempty"`
	Mappings      json.RawMessage                 `json:"mappings,omitempty"`
	Aliases       map[string]map[string]aliasMeta `json:"aliases,omitempty"`
	RemoveIndices []string                        `json:"remove_indices,omitempty"`
	SeqNo         int64                           `json:"seq_no,omitempty"`
	LastDeleteSeq int64                           `json:"last_delete_seq,omitempty"`
}

func encodeMeta(kind byte, m metaRecord) []byte {
	b, _ := json.Marshal(m)
	return append([]byte{kind}, b...)
}

func encodeIndexDoc(index, id string, v *docVersion) []byte {
	e := encoder{b: make([]byte, 0, 32+len(index)+len(id)+len(v.source))}
	e.byte1(recIndexDoc)
	e.str(index)
	e.str(id)
	e.varint(v.version)
	e.varint(v.seqNo)
	e.bytes(v.source)
	return e.b
}

func encodeDeleteDoc(index, id string, v *docVersion) []byte {
	e := encoder{}
	e.byte1(recDeleteDoc)
	e.str(index)
	e.str(id)
	e.varint(v.version)
	e.varint(v.seqNo)
	e.varint(v.time)
	return e.b
}

// replayer rebuilds server state from records.
type replayer struct {
	s        *Server
	sawEnd   bool
	recorded int
}

func (r *replayer) apply(payload []byte) error {
	if len(payload) == 0 {
		return errors.New("empty record")
	}
	r.recorded++
	s := r.s
	kind := payload[0]
	switch kind {
	case recIndexDoc, recDeleteDoc:
		d := decoder{b: payload[1:]}
		name, id := d.str(), d.str()
		v := &docVersion{version: d.varint(), seqNo: d.varint()}
		if kind == recIndexDoc {
			v.source = bytes.Clone(d.bytes())
		} else {
			v.deleted = true
			v.time = d.varint()
		}
		if d.err != nil {
			return d.err
		}
		ix := s.indices[name]
		if ix == nil {
			return fmt.Errorf("document record for unknown index [%s]", name)
		}
		ix.applyDoc(id, v)
		return nil
	case recSnapshotEnd:
		r.sawEnd = true
		return nil
	}
	var m metaRecord
	if err := json.Unmarshal(payload[1:], &m); err != nil {
		return fmt.Errorf("decode metadata record %d: %w", kind, err)
	}
	switch kind {
	case recCreateIndex:
		st, serr := parseSettings(m.Settings, 1)
		if serr != nil {
			return serr
		}
		mp, merr := parseMappings(m.Mappings)
		if merr != nil {
			return merr
		}
		s.indices[m.Name] = newIndex(m.Name, m.UUID, m.Created, st, mp)
	case recDeleteIndex:
		delete(s.indices, m.Name)
		s.dropAliasesOf(m.Name)
	case recMapping:
		ix := s.indices[m.Name]
		if ix == nil {
			return fmt.Errorf("mapping record for unknown index [%s]", m.Name)
		}
		mp, merr := parseMappings(m.Mappings)
		if merr != nil {
			return merr
		}
		ix.mapping = mp
	case recSettings:
		ix := s.indices[m.Name]
		if ix == nil {
			return fmt.Errorf("settings record for unknown index [%s]", m.Name)
		}
		st, serr := parseSettings(m.Settings, 1)
		if serr != nil {
			return serr
		}
		ix.settings = st
	case recAliases:
		for _, name := range m.RemoveIndices {
			delete(s.indices, name)
		}
		s.aliases = m.Aliases
		if s.aliases == nil {
			s.aliases = map[string]map[string]aliasMeta{}
		}
	case recClusterSettings:
		s.persistentSettings = m.Settings
	case recIndexState:
		ix := s.indices[m.Name]
		if ix == nil {
			return fmt.Errorf("state record for unknown index [%s]", m.Name)
		}
		ix.seqNo, ix.lastDeleteSeq = m.SeqNo, m.LastDeleteSeq
	default:
		return fmt.Errorf("unknown record kind %d", kind)
	}
	return nil
}

// recoverState loads the newest snapshot and replays the write-ahead log
// generations after it. It returns the next generation to write.
func (s *Server) recoverState() (uint64, error) {
	dir := s.stateDir()
	snaps, err := listGens(dir, "snapshot-", ".dat")
	if err != nil {
		return 0, err
	}
	var base uint64
	if len(snaps) > 0 {
		base = snaps[len(snaps)-1]
		r := &replayer{s: s}
		path := filepath.Join(dir, snapName(base))
		_, torn, err := readFrames(path, r.apply)
		if err != nil {
			return 0, fmt.Errorf("load snapshot: %w", err)
		}
		if torn || !r.sawEnd {
			return 0, fmt.Errorf("load snapshot %s: incomplete snapshot", path)
		}
	}
	wals, err := listGens(dir, "wal-", ".log")
	if err != nil {
		return 0, err
	}
	next := base + 1
	records := 0
	for i, g := range wals {
		if g < base {
			continue
		}
		path := filepath.Join(dir, walName(g))
		r := &replayer{s: s}
		valid, torn, err := readFrames(path, r.apply)
		if err != nil {
			return 0, fmt.Errorf("replay write-ahead log: %w", err)
		}
		records += r.recorded
		if torn {
			if i != len(wals)-1 {
				// A torn record can only be the tail of a log that was
				// being written when the process died; generations after
				// it were started by a later run, after truncation. Still,
				// be safe: cut it and go on.
				s.log.Warn("write-ahead log has a torn record before its last generation; truncating", "file", path, "offset", valid)
			} else {
				s.log.Info("truncating torn tail of write-ahead log", "file", path, "offset", valid)
			}
			if err := truncateFile(path, valid); err != nil {
				return 0, err
			}
		}
		if g+1 > next {
			next = g + 1
		}
	}
	s.log.Info("recovered state", "snapshot_generation", base, "log_records", records, "indices", len(s.indices))
	return next, nil
}

// checkpoint writes a snapshot of the whole state and drops the log
// generations it covers.
func (s *Server) checkpoint() error {
	s.cpMu.Lock()
	gen := s.wal.gen + 1
	if err := s.wal.rotate(gen); err != nil {
		s.cpMu.Unlock()
		return fmt.Errorf("checkpoint: rotate log: %w", err)
	}
	type capIndex struct {
		meta  metaRecord
		state metaRecord
		docs  map[string]*docVersion
	}
	s.mu.RLock()
	caps := make([]capIndex, 0, len(s.indices))
	for _, ix := range s.indices {
		ix.mu.Lock()
		docs := make(map[string]*docVersion, len(ix.docs))
		for k, v := range ix.docs {
			docs[k] = v
		}
		caps = append(caps, capIndex{
			meta:  metaRecord{Name: ix.name, UUID: ix.uuid, Created: ix.created, Settings: ix.settings.raw, Mappings: ix.mapping.marshal()},
			state: metaRecord{Name: ix.name, SeqNo: ix.seqNo, LastDeleteSeq: ix.lastDeleteSeq},
			docs:  docs,
		})
		ix.mu.Unlock()
	}
	aliases := cloneAliases(s.aliases)
	clusterSettings := maps.Clone(s.persistentSettings)
	s.mu.RUnlock()
	s.cpMu.Unlock()

	dir := s.stateDir()
	tmp := filepath.Join(dir, snapName(gen)+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var frame []byte
	put := func(payload []byte) {
		frame = appendFrame(frame[:0], payload)
		_, _ = w.Write(frame)
	}
	for _, c := range caps {
		put(encodeMeta(recCreateIndex, c.meta))
		for id, v := range c.docs {
			if v.deleted {
				put(encodeDeleteDoc(c.meta.Name, id, v))
			} else {
				put(encodeIndexDoc(c.meta.Name, id, v))
			}
		}
		put(encodeMeta(recIndexState, c.state))
	}
	put(encodeMeta(recAliases, metaRecord{Aliases: aliases}))
	if len(clusterSettings) > 0 {
		put(encodeMeta(recClusterSettings, metaRecord{Settings: clusterSettings}))
	}
	put([]byte{recSnapshotEnd})
	err = w.Flush()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, snapName(gen)))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("checkpoint: write snapshot: %w", err)
	}
	// Older snapshots and log generations are now redundant.
	for _, kind := range [][2]string{{"snapshot-", ".dat"}, {"wal-", ".log"}} {
		gens, err := listGens(dir, kind[0], kind[1])
		if err != nil {
			return err
		}
		for _, g := range gens {
			if g < gen {
				_ = os.Remove(filepath.Join(dir, kind[0]+fmt.Sprintf("%016d", g)+kind[1]))
			}
		}
	}
	s.log.Debug("checkpoint written", "generation", gen)
	return nil
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
