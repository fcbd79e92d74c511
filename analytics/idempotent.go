package analytics

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/eventpipe/eventpipe/internal/ddbattr"
)

// shardOf is the shard of an event with id: FNV-1a of the id's canonical
// string modulo Config.Shards, so the same id always has the same key.
func (s *Store) shardOf(id ulid.ULID) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id.String()))
	return int(h.Sum32() % uint32(s.cfg.Shards))
}

// derivedID is the id of the event at index of a batch ingested with an
// idempotency key: a ULID whose time is createdAt and whose 80 bits of
// entropy are the first 48 bits of SHA-256(source, key) then index as
// 32 bits, so that the same batch gets the same ids and events of the
// same millisecond keep their batch order.
func derivedID(sourceID, key string, index int, createdAt time.Time) ulid.ULID {
	sum := sha256.Sum256([]byte(sourceID + "\x00" + key))
	var entropy [10]byte
	copy(entropy[:6], sum[:6])
	binary.BigEndian.PutUint32(entropy[6:], uint32(index))
	var id ulid.ULID
	_ = id.SetTime(ulid.Timestamp(createdAt)) // createdAt is checked: well within ULID time
	_ = id.SetEntropy(entropy[:])
	return id
}

// scopedKey is the idempotency key as the table keeps it and event ids
// derive from it: key itself without a caller (or without a key), else
// "caller:" and the unpadded base64url SHA-256 of the caller and key, so
// that the same key of two callers is two keys.
func scopedKey(caller, key string) string {
	if caller == "" || key == "" {
		return key
	}
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(caller)))
	h.Write(n[:])
	h.Write([]byte(caller))
	h.Write([]byte(key))
	return "caller:" + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// validKey checks an idempotency key: 1–255 printable ASCII characters
// (an HTTP header's sf-string).
func validKey(key string) error {
	if len(key) > MaxIdempotencyKeyBytes {
		return invalid("idempotencyKey", "is %d bytes, at most %d", len(key), MaxIdempotencyKeyBytes)
	}
	for _, r := range []byte(key) {
		if r < 0x20 || r > 0x7e {
			return invalid("idempotencyKey", "%q has a character that is not printable ASCII", key)
		}
	}
	return nil
}

// fingerprint is the hex SHA-256 of a batch's JSON (its events as
// decoded, so the spacing of a body does not matter).
func fingerprint(sourceID string, in []EventInput) string {
	b, _ := json.Marshal(struct {
		Source string       `json:"s"`
		Events []EventInput `json:"e"`
	}{sourceID, in}) // the events were checked: they encode
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// claimKey remembers scoped (scopedKey of the client's key) for a batch
// with fingerprint fp, first used now, unless it is remembered (and not
// expired) already. It returns when the key was first used, or a
// *KeyReuseError naming the client's key when that was with another
// batch.
func (s *Store) claimKey(ctx context.Context, sourceID, scoped, key, fp string, now time.Time) (time.Time, error) {
	k := IdempotencyKeyKey(sourceID, scoped)
	for attempt := 0; attempt < 3; attempt++ {
		it := k.Attributes()
		it[AttrSourceID] = ddbattr.S(sourceID)
		it[AttrFingerprint] = ddbattr.S(fp)
		it[AttrFirstUsedAt] = ddbattr.S(formatTime(now))
		it[AttrTTL] = ddbattr.N(now.Add(s.cfg.IdempotencyTTL).Unix())
		_, err := s.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                 aws.String(s.cfg.Table),
			Item:                      it,
			ConditionExpression:       aws.String("attribute_not_exists(#pk) OR #ttl < :now"),
			ExpressionAttributeNames:  map[string]string{"#pk": AttrPK, "#ttl": AttrTTL},
			ExpressionAttributeValues: map[string]types.AttributeValue{":now": ddbattr.N(now.Unix())},
		})
		if err == nil {
			s.cfg.Logger.DebugContext(ctx, "idempotency key claimed", "source", sourceID, "key", key)
			return now, nil
		}
		if !isConditionFailed(err) {
			return time.Time{}, fmt.Errorf("claim idempotency key %q: %w", key, err)
		}
		out, err := s.cfg.Client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.cfg.Table), Key: k.Attributes(), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return time.Time{}, fmt.Errorf("read idempotency key %q: %w", key, err)
		}
		if out.Item == nil {
			continue // expired and deleted in between: claim it again
		}
		d := decoder{it: out.Item}
		stored, first := d.s(AttrFingerprint), d.time(AttrFirstUsedAt)
		if err := d.result("idempotency key"); err != nil {
			return time.Time{}, err
		}
		if stored != fp {
			return time.Time{}, &KeyReuseError{SourceID: sourceID, Key: key, FirstUsed: first}
		}
		s.cfg.Logger.DebugContext(ctx, "idempotency key repeated", "source", sourceID, "key", key, "first_used", first)
		return first, nil
	}
	return time.Time{}, fmt.Errorf("claim idempotency key %q: it expired and came back 3 times", key)
}

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

// write writes the events of b not yet marked (duplicates within the
// batch are), setting each result's Status (and Err). It returns a
// *WriteError when some failed.
func (s *Store) write(ctx context.Context, b *batch, results []Result) error {
	var withID, plain []int
	for i, r := range results {
		switch {
		case r.Status != "":
		case b.checked[i].id != (ulid.ULID{}) || b.key != "":
			withID = append(withID, i)
		default:
			plain = append(plain, i)
		}
	}
	var (
		mu      sync.Mutex
		lastErr error
	)
	fail := func(i int, err error) {
		mu.Lock()
		defer mu.Unlock()
		results[i].Status, results[i].Err, lastErr = StatusFailed, err, err
	}
	// The events with an id: conditional puts, WriteConcurrency at once.
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(s.cfg.WriteConcurrency, len(withID)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				created, err := s.putNew(ctx, b.items[i])
				switch {
				case err != nil:
					fail(i, err)
				case created || b.checked[i].id == (ulid.ULID{}):
					// A derived id exists only if this key's batch wrote it.
					results[i].Status = StatusStored
				default:
					results[i].Status = StatusDuplicate
				}
			}
		}()
	}
	for _, i := range withID {
		next <- i
	}
	close(next)
	wg.Wait()
	// The events without: BatchWriteItem.
	if len(plain) > 0 {
		items := make([]item, len(plain))
		for j, i := range plain {
			items[j] = b.items[i]
		}
		unwritten, err := s.writeItems(ctx, items)
		for j, i := range plain {
			if _, missing := slices.BinarySearch(unwritten, j); missing {
				fail(i, err)
			} else {
				results[i].Status = StatusStored
			}
		}
	}
	var failed []int
	for i, r := range results {
		if r.Status == StatusFailed {
			failed = append(failed, i)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	s.cfg.Logger.WarnContext(ctx, "events not written", "source", b.sourceID, "failed", len(failed), "events", len(results), "err", lastErr)
	return &WriteError{Written: len(results) - len(failed), NotWritten: len(failed), Unwritten: failed, Err: lastErr}
}

// putNew writes an event item unless its key exists; created is false
// when it did (nothing was written).
func (s *Store) putNew(ctx context.Context, it item) (created bool, err error) {
	_, err = s.cfg.Client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(s.cfg.Table),
		Item:                     it,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": AttrPK},
	})
	switch {
	case err == nil:
		return true, nil
	case isConditionFailed(err):
		return false, nil
	default:
		return false, fmt.Errorf("put event %s: %w", skOf(it), err)
	}
}
