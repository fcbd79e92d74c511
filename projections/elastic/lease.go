package elastic

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"github.com/eventpipe/eventpipe/projections/elastic/esclient"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/eventpipe/eventpipe/projections"
)

// LockIndex holds the replay locks: one lease document per alias.
const LockIndex = "eventpipe-replay-locks"

// lease is a held replay lock: a document that names its holder and
// expiry, changed only with if_seq_no / if_primary_term, so that two
// replays cannot both hold it and a killed replay's lock expires.
type lease struct {
	es           esapi.Transport
	id, holder   string
	ttl          time.Duration
	seqNo, pterm int
}

type leaseDoc struct {
	Holder    string `json:"holder"`
	ExpiresAt int64  `json:"expires_at"` // unix milliseconds
}

type writeAnswer struct {
	SeqNo       int `json:"_seq_no"`
	PrimaryTerm int `json:"_primary_term"`
}

// acquireLease takes the replay lock of alias, or returns
// projections.ErrReplayRunning while another replay holds it.
func acquireLease(ctx context.Context, es esapi.Transport, alias string, ttl time.Duration) (*lease, error) {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	l := &lease{es: es, id: alias, holder: hex.EncodeToString(b), ttl: ttl}
	var w writeAnswer
	err := esclient.Do(ctx, es, esapi.IndexRequest{Index: LockIndex, DocumentID: esclient.PathSegment(l.id), OpType: "create", Body: l.body(), Refresh: "true"}, &w)
	if esclient.IsConflict(err) {
		var cur struct {
			SeqNo       int      `json:"_seq_no"`
			PrimaryTerm int      `json:"_primary_term"`
			Source      leaseDoc `json:"_source"`
		}
		if err := esclient.Do(ctx, es, esapi.GetRequest{Index: LockIndex, DocumentID: esclient.PathSegment(l.id)}, &cur); err != nil {
			return nil, fmt.Errorf("elastic: read the replay lock of %s: %w", alias, err)
		}
		if time.UnixMilli(cur.Source.ExpiresAt).After(time.Now()) {
			return nil, fmt.Errorf("%w (lock %s/%s held by %s until %s)", projections.ErrReplayRunning, LockIndex, alias,
				cur.Source.Holder, time.UnixMilli(cur.Source.ExpiresAt).UTC().Format(time.RFC3339))
		}
		l.seqNo, l.pterm = cur.SeqNo, cur.PrimaryTerm
		if err := l.renew(ctx); err != nil {
			if esclient.IsConflict(err) {
				return nil, fmt.Errorf("%w (another replay took the expired lock of %s)", projections.ErrReplayRunning, alias)
			}
			return nil, err
		}
		return l, nil
	}
	if err != nil {
		return nil, fmt.Errorf("elastic: take the replay lock of %s: %w", alias, err)
	}
	l.seqNo, l.pterm = w.SeqNo, w.PrimaryTerm
	return l, nil
}

func (l *lease) body() io.Reader {
	return esclient.JSONBody(leaseDoc{Holder: l.holder, ExpiresAt: time.Now().Add(l.ttl).UnixMilli()})
}

// renew moves the expiry on, if the lease is still ours.
func (l *lease) renew(ctx context.Context) error {
	seq, term := l.seqNo, l.pterm
	var w writeAnswer
	if err := esclient.Do(ctx, l.es, esapi.IndexRequest{Index: LockIndex, DocumentID: esclient.PathSegment(l.id), Body: l.body(), IfSeqNo: &seq, IfPrimaryTerm: &term, Refresh: "true"}, &w); err != nil {
		return fmt.Errorf("elastic: renew the replay lock of %s: %w", l.id, err)
	}
	l.seqNo, l.pterm = w.SeqNo, w.PrimaryTerm
	return nil
}

// keep renews the lease every third of its TTL until ctx ends; when a
// renewal fails it cancels the replay (another may take the lock).
func (l *lease) keep(ctx context.Context, cancel context.CancelCauseFunc) {
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := l.renew(ctx); err != nil && ctx.Err() == nil {
				cancel(err)
				return
			}
		}
	}
}

// release deletes the lease if it is still ours.
func (l *lease) release(ctx context.Context) error {
	seq, term := l.seqNo, l.pterm
	err := esclient.Do(ctx, l.es, esapi.DeleteRequest{Index: LockIndex, DocumentID: esclient.PathSegment(l.id), IfSeqNo: &seq, IfPrimaryTerm: &term, Refresh: "true"}, nil)
	if err != nil && !esclient.IsNotFound(err) {
		return fmt.Errorf("elastic: release the replay lock of %s: %w", l.id, err)
	}
	return nil
}
