package esserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2"
)

// docVersion is one immutable state of a document: live or a delete
// tombstone. The latest state of every id lives in index.docs.
type docVersion struct {
	source  []byte // nil for tombstones
	version int64
	seqNo   int64
	deleted bool
	time    int64 // unix millis when a tombstone was written
}

type tombRef struct {
	id string
	v  *docVersion
}

// index is one Elasticsearch index: the authoritative document store (real
// time, rebuilt from the write-ahead log) plus a bleve index that holds the
// last refreshed state for search.
type index struct {
	name    string
	uuid    string
	created int64

	mu            sync.Mutex
	settings      *indexSettings
	mapping       *mappings
	docs          map[string]*docVersion
	seqNo         int64 // last assigned sequence number, -1 when none
	lastDeleteSeq int64
	pending       map[string]*docVersion // changed since the last refresh
	tombs         []tombRef              // tombstones in write order, for gc_deletes
	removed       bool                   // the index was deleted

	refreshMu     sync.Mutex // serialises refreshes
	refreshed     atomic.Int64
	lastRefresh   atomic.Int64 // unix nanos
	refreshSignal chan struct{}
	signalMu      sync.Mutex

	engMu sync.RWMutex // guards bleve against closing while in use
	bleve bleve.Index
	dir   string
	cols  columnCache // doc-value columns of bleve's segments (columns.go)
	// noPrune scores every match of a match query (the benchmarks'
	// baseline; topk.go).
	noPrune atomic.Bool
	// noColFilter evaluates range filters with bleve's searchers instead
	// of columns (colfilter.go; the benchmarks' comparison).
	noColFilter atomic.Bool
}

func newIndex(name, uuid string, created int64, st *indexSettings, m *mappings) *index {
	ix := &index{
		name: name, uuid: uuid, created: created, settings: st, mapping: m,
		docs: map[string]*docVersion{}, seqNo: -1, lastDeleteSeq: -1,
		pending: map[string]*docVersion{}, refreshSignal: make(chan struct{}),
	}
	ix.refreshed.Store(-1)
	return ix
}

// writeOp is one document operation (from the document APIs or a bulk item).
type writeOp struct {
	action      string // index, create, delete, update
	id          string
	source      []byte         // index/create
	doc         map[string]any // parsed source (index/create), or the partial doc (update)
	upsert      map[string]any
	docAsUpsert bool
	detectNoop  bool
	version     int64
	versionType string // internal, external, external_gte
	hasVersion  bool
	ifSeqNo     int64
	ifTerm      int64
	hasIfSeqNo  bool
	// fetchSource asks an update for the written document in the
	// response ("get"); nil: not asked.
	fetchSource *sourceFilter
}

// writeResult is the outcome of a write.
type writeResult struct {
	ix      *index
	id      string
	version int64
	seqNo   int64
	result  string // created, updated, deleted, not_found, noop
	status  int
	pos     int64 // WAL position to wait for (0 for noop)
	err     *esError
	source  []byte // the document as written (or as it is, for a noop)
}

func (r *writeResult) body() map[string]any {
	if r.err != nil {
		return nil
	}
	return map[string]any{
		"_index": r.ix.name, "_id": r.id, "_version": r.version, "result": r.result,
		"_shards": r.ix.shardsHeader(r.result != "noop"), "_seq_no": r.seqNo, "_primary_term": 1,
	}
}

func (ix *index) shardsHeader(wrote bool) map[string]any {
	ix.mu.Lock()
	rep := ix.settings.Replicas
	ix.mu.Unlock()
	if !wrote {
		return map[string]any{"total": 0, "successful": 0, "failed": 0}
	}
	return map[string]any{"total": 1 + rep, "successful": 1, "failed": 0}
}

// validateVersioning checks the versioning parameters of op the way the
// Elasticsearch request validation does.
func validateVersioning(op *writeOp) *esError {
	vt := op.versionType
	switch vt {
	case "", "internal", "external", "external_gte":
	case "force":
		return illegalArgument("version type [force] may no longer be used")
	default:
		return illegalArgument("No version type match [%s]", vt)
	}
	external := vt == "external" || vt == "external_gte"
	if op.hasVersion && !external {
		if op.action == "delete" || op.action == "index" || op.action == "create" || op.action == "update" {
			return validationError("internal versioning can not be used for optimistic concurrency control. Please use `if_seq_no` and `if_primary_term` instead")
		}
	}
	if external && !op.hasVersion {
		return validationError("an explicit version is required for version type [" + vt + "]")
	}
	if external && op.action == "create" {
		return validationError("create operations only support internal versioning. use index instead")
	}
	if external && op.action == "update" {
		return validationError("can't provide version type [" + vt + "] for updates")
	}
	if op.hasVersion && op.version < 0 {
		return validationError("illegal version value [" + itoa(op.version) + "] for version type [" + strings.ToUpper(vt) + "]")
	}
	if op.hasIfSeqNo && external {
		return validationError("compare and write operations can not use versioning")
	}
	if op.hasIfSeqNo && op.action == "create" {
		return validationError("create operations do not support compare and set. use index instead")
	}
	if op.hasIfSeqNo && op.ifSeqNo < 0 {
		return validationError("ifSeqNo must be non negative")
	}
	if op.hasIfSeqNo && op.ifTerm <= 0 {
		return validationError("ifSeqNo is set, but primary term is [" + itoa(op.ifTerm) + "]")
	}
	if op.id != "" && len(op.id) > 512 {
		return validationError("id [" + op.id[:20] + "...] is too long, must be no longer than 512 bytes but was: " + itoa(int64(len(op.id))))
	}
	return nil
}

// checkIfSeqNo applies if_seq_no/if_primary_term.
func (ix *index) checkIfSeqNo(op *writeOp, cur *docVersion) *esError {
	if !op.hasIfSeqNo {
		return nil
	}
	if cur == nil || cur.deleted {
		return ix.conflict(op.id, "version conflict, required seqNo ["+itoa(op.ifSeqNo)+"], primary term ["+itoa(op.ifTerm)+"]. but no document was found")
	}
	if cur.seqNo != op.ifSeqNo || op.ifTerm != 1 {
		return ix.conflict(op.id, "version conflict, required seqNo ["+itoa(op.ifSeqNo)+"], primary term ["+itoa(op.ifTerm)+"]. current document has seqNo ["+itoa(cur.seqNo)+"] and primary term [1]")
	}
	return nil
}

// nextVersion computes the version for a write, or a conflict.
func (ix *index) nextVersion(op *writeOp, cur *docVersion) (int64, *esError) {
	switch op.versionType {
	case "external", "external_gte":
		if cur != nil {
			if op.versionType == "external" && op.version <= cur.version {
				return 0, ix.conflict(op.id, "version conflict, current version ["+itoa(cur.version)+"] is higher or equal to the one provided ["+itoa(op.version)+"]")
			}
			if op.versionType == "external_gte" && op.version < cur.version {
				return 0, ix.conflict(op.id, "version conflict, current version ["+itoa(cur.version)+"] is higher than the one provided ["+itoa(op.version)+"]")
			}
		}
		return op.version, nil
	}
	if cur == nil {
		return 1, nil
	}
	return cur.version + 1, nil
}

// apply performs one write against the index. The caller holds the server's
// checkpoint lock in read mode. The write is appended to the WAL and
// applied in memory; the caller waits for durability at res.pos.
func (s *Server) apply(ix *index, op *writeOp) *writeResult {
	res := &writeResult{ix: ix, id: op.id}
	if err := validateVersioning(op); err != nil {
		res.err = err
		return res
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.removed {
		res.err = indexNotFound(ix.name)
		return res
	}
	if ix.settings.WriteBlock {
		res.err = writeBlocked(ix.name)
		return res
	}
	cur := ix.docs[op.id]
	live := cur != nil && !cur.deleted
	// An update of a missing document is document_missing_exception (404)
	// whatever if_seq_no says (UpdateHelper looks the document up first).
	missingUpdate := op.action == "update" && !live && op.upsert == nil && !op.docAsUpsert
	if err := ix.checkIfSeqNo(op, cur); err != nil && !missingUpdate {
		res.err = err
		return res
	}
	switch op.action {
	case "delete":
		v, err := ix.nextVersion(op, cur)
		if err != nil {
			res.err = err
			return res
		}
		res.result, res.status = "deleted", http.StatusOK
		if !live {
			res.result, res.status = "not_found", http.StatusNotFound
		}
		nv := &docVersion{version: v, seqNo: ix.seqNo + 1, deleted: true, time: time.Now().UnixMilli()}
		pos, werr := s.wal.append(encodeDeleteDoc(ix.name, op.id, nv))
		if werr != nil {
			res.err = internalError(werr)
			return res
		}
		ix.applyDoc(op.id, nv)
		res.version, res.seqNo, res.pos = nv.version, nv.seqNo, pos
		return res
	case "update":
		return s.applyUpdate(ix, op, cur, res)
	}
	// index / create
	if op.action == "create" && live {
		res.err = ix.conflict(op.id, "version conflict, document already exists (current version ["+itoa(cur.version)+"])")
		return res
	}
	v, err := ix.nextVersion(op, cur)
	if err != nil {
		res.err = err
		return res
	}
	return s.writeSource(ix, op.id, op.source, op.doc, v, live, res)
}

// writeSource validates a full source against the mapping (adding dynamic
// fields), logs and applies it. ix.mu is held.
func (s *Server) writeSource(ix *index, id string, source []byte, doc map[string]any, version int64, live bool, res *writeResult) *writeResult {
	p, perr := parseDocument(id, doc, ix.mapping, true)
	if perr != nil {
		res.err = perr
		return res
	}
	if p.changed {
		if _, werr := s.wal.append(encodeMeta(recMapping, metaRecord{Name: ix.name, Mappings: p.m.marshal()})); werr != nil {
			res.err = internalError(werr)
			return res
		}
		ix.mapping = p.m
	}
	nv := &docVersion{source: source, version: version, seqNo: ix.seqNo + 1}
	pos, werr := s.wal.append(encodeIndexDoc(ix.name, id, nv))
	if werr != nil {
		res.err = internalError(werr)
		return res
	}
	ix.applyDoc(id, nv)
	res.version, res.seqNo, res.pos, res.source = nv.version, nv.seqNo, pos, source
	res.result, res.status = "updated", http.StatusOK
	if !live {
		res.result, res.status = "created", http.StatusCreated
	}
	return res
}

func (s *Server) applyUpdate(ix *index, op *writeOp, cur *docVersion, res *writeResult) *writeResult {
	live := cur != nil && !cur.deleted
	if !live {
		var src map[string]any
		switch {
		case op.upsert != nil:
			src = op.upsert
		case op.docAsUpsert:
			src = op.doc
		default:
			res.err = newErr(http.StatusNotFound, "document_missing_exception", "[%s]: document missing", op.id).
				with("index_uuid", ix.uuid).with("shard", "0").with("index", ix.name)
			return res
		}
		b, _ := json.Marshal(src)
		v, _ := ix.nextVersion(op, cur)
		return s.writeSource(ix, op.id, b, src, v, false, res)
	}
	old, err := decodeSource(cur.source)
	if err != nil {
		res.err = internalError(err)
		return res
	}
	merged, changed := mergeDoc(old, op.doc)
	if !changed && op.detectNoop {
		res.version, res.seqNo, res.result, res.status, res.source = cur.version, cur.seqNo, "noop", http.StatusOK, cur.source
		return res
	}
	b, _ := json.Marshal(merged)
	return s.writeSource(ix, op.id, b, merged, cur.version+1, true, res)
}

// mergeDoc deep-merges a partial document into dst (objects merge
// recursively, everything else replaces) and reports whether anything
// changed.
func mergeDoc(dst, partial map[string]any) (map[string]any, bool) {
	changed := false
	for k, v := range partial {
		if sub, ok := v.(map[string]any); ok {
			if dsub, ok := dst[k].(map[string]any); ok {
				var c bool
				dst[k], c = mergeDoc(dsub, sub)
				changed = changed || c
				continue
			}
		}
		if old, ok := dst[k]; !ok || !jsonEqual(old, v) {
			changed = true
		}
		dst[k] = v
	}
	return dst, changed
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// applyDoc installs a new document state. ix.mu is held (or recovery).
func (ix *index) applyDoc(id string, v *docVersion) {
	ix.docs[id] = v
	if v.seqNo > ix.seqNo {
		ix.seqNo = v.seqNo
	}
	if v.deleted {
		if v.seqNo > ix.lastDeleteSeq {
			ix.lastDeleteSeq = v.seqNo
		}
		ix.tombs = append(ix.tombs, tombRef{id: id, v: v})
	}
	ix.pending[id] = v
}

// gcTombstones drops delete tombstones older than index.gc_deletes, as
// Elasticsearch does; afterwards the id is treated as never seen.
func (ix *index) gcTombstones(now time.Time) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	limit := now.Add(-ix.settings.GCDeletes).UnixMilli()
	n := 0
	for n < len(ix.tombs) && ix.tombs[n].v.time <= limit {
		t := ix.tombs[n]
		if ix.docs[t.id] == t.v {
			delete(ix.docs, t.id)
		}
		n++
	}
	if n > 0 {
		ix.tombs = append([]tombRef(nil), ix.tombs[n:]...)
	}
}

// get returns the latest live state of a document (real time).
func (ix *index) get(id string) *docVersion {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if v := ix.docs[id]; v != nil && !v.deleted {
		return v
	}
	return nil
}

func (ix *index) currentMapping() *mappings {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.mapping
}

func (ix *index) currentSettings() *indexSettings {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.settings
}
