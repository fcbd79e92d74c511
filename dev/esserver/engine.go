package esserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	bindex "github.com/blevesearch/bleve_index_api"
)

// The bleve index of each Elasticsearch index is a derived, rebuildable
// structure: it holds the state as of the last refresh, and records in an
// internal key the sequence number up to which it is complete. Refreshes
// only ever apply writes that are already durable in the write-ahead log,
// so after a crash the bleve index never holds more than the recovered
// state; recovery re-applies whatever it lacks.

var checkpointKey = []byte("eventpipe_refreshed_seq_no")

const (
	fieldSource     = "_source"
	fieldMeta       = "_eventpipe_meta"
	fieldFieldNames = "_field_names"
	refreshChunk    = 2000
)

var bleveConfig = map[string]any{"unsafe_batch": true}

func bleveMapping() *mapping.IndexMappingImpl {
	im := mapping.NewIndexMapping()
	im.DefaultMapping.Dynamic = false
	im.IndexDynamic = false
	im.StoreDynamic = false
	im.DocValuesDynamic = false
	im.ScoringModel = bindex.BM25Scoring
	return im
}

// openEngine opens the bleve index of ix, creating it when missing or
// unreadable. fresh reports that it starts empty.
func (s *Server) openEngine(ix *index) (fresh bool, err error) {
	ix.cols.reset()
	ix.dir = filepath.Join(s.cfg.DataDir, "indices", ix.uuid)
	if _, statErr := os.Stat(filepath.Join(ix.dir, "index_meta.json")); statErr == nil {
		b, err := bleve.OpenUsing(ix.dir, bleveConfig)
		if err == nil {
			ix.bleve = b
			return false, nil
		}
		s.log.Warn("search index unreadable; rebuilding it from the document store", "index", ix.name, "error", err)
	}
	if err := os.RemoveAll(ix.dir); err != nil {
		return false, fmt.Errorf("remove search index %s: %w", ix.dir, err)
	}
	if err := os.MkdirAll(filepath.Dir(ix.dir), 0o755); err != nil {
		return false, fmt.Errorf("create indices dir: %w", err)
	}
	b, err := bleve.NewUsing(ix.dir, bleveMapping(), scorch.Name, scorch.Name, bleveConfig)
	if err != nil {
		return false, fmt.Errorf("create search index for [%s]: %w", ix.name, err)
	}
	ix.bleve = b
	return true, nil
}

// reconcile brings a recovered bleve index up to the recovered document
// state and makes everything searchable.
func (s *Server) reconcile(ix *index, fresh bool) error {
	applied := int64(-1)
	if !fresh {
		if v, err := ix.bleve.GetInternal(checkpointKey); err == nil && v != nil {
			if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
				applied = n
			}
		}
	}
	if applied > ix.seqNo {
		// The search index claims more than the durable state holds; this
		// cannot happen unless files were mixed up. Rebuild it.
		s.log.Warn("search index ahead of the document store; rebuilding", "index", ix.name, "applied", applied, "seq_no", ix.seqNo)
		_ = ix.bleve.Close()
		_ = os.RemoveAll(ix.dir)
		if _, err := s.openEngine(ix); err != nil {
			return err
		}
		applied = -1
		fresh = true
	}
	pending := map[string]*docVersion{}
	for id, v := range ix.docs {
		if v.seqNo > applied {
			pending[id] = v
		}
	}
	if !fresh && ix.lastDeleteSeq > applied {
		// Deletes after the checkpoint whose tombstones may be gone:
		// drop every indexed id that is not live.
		ids, err := allIDs(ix.bleve)
		if err != nil {
			return fmt.Errorf("list search index ids of [%s]: %w", ix.name, err)
		}
		for _, id := range ids {
			if v := ix.docs[id]; v == nil || v.deleted {
				if _, ok := pending[id]; !ok {
					pending[id] = &docVersion{deleted: true}
				}
			}
		}
	}
	sort.Slice(ix.tombs, func(i, j int) bool { return ix.tombs[i].v.time < ix.tombs[j].v.time })
	ix.pending = map[string]*docVersion{}
	if len(pending) > 0 {
		start := time.Now()
		if err := indexBatch(ix, pending, ix.mapping, ix.seqNo); err != nil {
			return err
		}
		s.log.Info("search index caught up", "index", ix.name, "documents", len(pending), "took", time.Since(start).String())
	} else if applied < ix.seqNo {
		b := ix.bleve.NewBatch()
		b.SetInternal(checkpointKey, []byte(strconv.FormatInt(ix.seqNo, 10)))
		if err := ix.bleve.Batch(b); err != nil {
			return fmt.Errorf("record refresh checkpoint of [%s]: %w", ix.name, err)
		}
	}
	ix.refreshed.Store(ix.seqNo)
	ix.lastRefresh.Store(time.Now().UnixNano())
	return nil
}

func allIDs(b bleve.Index) ([]string, error) {
	adv, err := b.Advanced()
	if err != nil {
		return nil, err
	}
	r, err := adv.Reader()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	dr, err := r.DocIDReaderAll()
	if err != nil {
		return nil, err
	}
	defer dr.Close()
	var ids []string
	for {
		iid, err := dr.Next()
		if err != nil {
			return nil, err
		}
		if iid == nil {
			break
		}
		id, err := r.ExternalID(iid)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// indexBatch applies document states to bleve and records upto as the
// refresh checkpoint.
func indexBatch(ix *index, pending map[string]*docVersion, m *mappings, upto int64) error {
	b := ix.bleve.NewBatch()
	n := 0
	flush := func(last bool) error {
		if last {
			b.SetInternal(checkpointKey, []byte(strconv.FormatInt(upto, 10)))
		}
		if err := ix.bleve.Batch(b); err != nil {
			return fmt.Errorf("apply refresh to search index of [%s]: %w", ix.name, err)
		}
		b = ix.bleve.NewBatch()
		n = 0
		return nil
	}
	for id, v := range pending {
		if v.deleted {
			b.Delete(id)
		} else {
			if err := b.IndexAdvanced(buildDoc(id, v, m)); err != nil {
				return fmt.Errorf("build search document [%s]: %w", id, err)
			}
		}
		n++
		if n >= refreshChunk {
			if err := flush(false); err != nil {
				return err
			}
		}
	}
	return flush(true)
}

// buildDoc converts a stored document into its bleve form.
func buildDoc(id string, v *docVersion, m *mappings) *document.Document {
	d := document.NewDocument(id)
	d.AddField(document.NewTextFieldWithIndexingOptions(fieldSource, nil, v.source, bindex.StoreField))
	d.AddField(document.NewTextFieldWithIndexingOptions(fieldMeta, nil,
		[]byte(strconv.FormatInt(v.version, 10)+":"+strconv.FormatInt(v.seqNo, 10)), bindex.StoreField))
	src, err := decodeSource(v.source)
	if err != nil {
		return d
	}
	p, perr := parseDocument(id, src, m, false)
	if perr != nil {
		return d
	}
	for _, lv := range p.leaves {
		fm := lv.fm
		if fm.Index != nil && !*fm.Index && (fm.Kind == kindText || fm.DocValues != nil && !*fm.DocValues) {
			// not searchable and without doc values; index: false with
			// doc values is still searched, sorted and aggregated
			// (Elasticsearch 8.1+ searches such fields through their
			// doc values), so it is indexed here like any other field
			continue
		}
		opts := bindex.IndexField
		if fm.DocValues == nil || *fm.DocValues {
			opts |= bindex.DocValues
		}
		switch fm.Kind {
		case kindText:
			d.AddField(document.NewTextFieldCustom(lv.path, nil, []byte(lv.s), bindex.IndexField, analyzerFor(fm.Analyzer)))
		case kindKeyword:
			d.AddField(document.NewTextFieldCustom(lv.path, nil, []byte(lv.s), opts, analyzers["keyword"]))
		case kindNumber, kindDate:
			d.AddField(document.NewNumericFieldWithIndexingOptions(lv.path, nil, lv.f, opts))
		case kindBool:
			d.AddField(document.NewBooleanFieldWithIndexingOptions(lv.path, nil, lv.s == "T", opts))
		}
	}
	for name := range p.names {
		d.AddField(document.NewTextFieldCustom(fieldFieldNames, nil, []byte(name), bindex.IndexField, analyzers["keyword"]))
	}
	return d
}

// refresh makes every durable write of ix searchable.
func (s *Server) refresh(ix *index) error {
	ix.refreshMu.Lock()
	defer ix.refreshMu.Unlock()
	ix.mu.Lock()
	if ix.removed {
		ix.mu.Unlock()
		return nil
	}
	pending := ix.pending
	upto := ix.seqNo
	m := ix.mapping
	if len(pending) > 0 {
		ix.pending = map[string]*docVersion{}
	}
	ix.mu.Unlock()
	if len(pending) > 0 {
		err := s.wal.waitDurable(s.wal.end())
		if err == nil {
			ix.engMu.RLock()
			if ix.bleve != nil {
				err = indexBatch(ix, pending, m, upto)
			}
			ix.engMu.RUnlock()
		}
		if err != nil {
			ix.mu.Lock()
			for id, v := range pending {
				if _, newer := ix.pending[id]; !newer {
					ix.pending[id] = v
				}
			}
			ix.mu.Unlock()
			return err
		}
	}
	ix.refreshed.Store(upto)
	ix.lastRefresh.Store(time.Now().UnixNano())
	ix.signalMu.Lock()
	close(ix.refreshSignal)
	ix.refreshSignal = make(chan struct{})
	ix.signalMu.Unlock()
	return nil
}

// waitRefreshed blocks until a refresh covering seq has happened
// (refresh=wait_for). With periodic refresh disabled it refreshes.
func (s *Server) waitRefreshed(ctx context.Context, ix *index, seq int64) error {
	if ix.currentSettings().RefreshInterval < 0 {
		return s.refresh(ix)
	}
	for ix.refreshed.Load() < seq {
		ix.signalMu.Lock()
		ch := ix.refreshSignal
		ix.signalMu.Unlock()
		if ix.refreshed.Load() >= seq {
			break
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.stopping:
			return errors.New("server is shutting down")
		}
	}
	return nil
}

func (ix *index) closeEngine() error {
	ix.engMu.Lock()
	defer ix.engMu.Unlock()
	if ix.bleve == nil {
		return nil
	}
	err := ix.bleve.Close()
	ix.bleve = nil
	ix.cols.reset()
	return err
}
