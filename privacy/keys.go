package privacy

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/hashicorp/golang-lru/v2/expirable"
	"golang.org/x/sync/singleflight"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Defaults of KeyStoreConfig.
const (
	DefaultKeysTable = "eventpipe-subject-keys"
	DefaultKeyID     = "alias/eventpipe-subjects"
	DefaultCacheSize = 10_000
	DefaultCacheTTL  = time.Minute
	// MaxSubjectLen bounds a subject id (it is a DynamoDB key and travels
	// in every sealed value).
	MaxSubjectLen = 256
)

// The attributes of an item of the keys table, one per subject.
const (
	AttrSubject     = "subject"      // the table's hash key
	AttrWrapped     = "wrapped"      // the data key wrapped by the KMS key (B); absent once forgotten
	AttrKMSKey      = "kms_key"      // the ARN of the KMS key that wrapped it
	AttrCreatedAt   = "created_at"   // RFC 3339
	AttrForgottenAt = "forgotten_at" // RFC 3339, set by Forget
)

// DynamoDBAPI is what a KeyStore needs of a DynamoDB client.
type DynamoDBAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// KeyStoreConfig configures a KeyStore.
type KeyStoreConfig struct {
	// DB holds the keys table. Required.
	DB DynamoDBAPI
	// Table is the keys table (default DefaultKeysTable; `eventpipe
	// migrate` creates it).
	Table string
	// KMS makes and unwraps the data keys. Required.
	KMS KMS
	// KeyID is the KMS key new data keys are wrapped by: an id, ARN or
	// alias (default DefaultKeyID). Keys made before a change keep the
	// KMS key that wrapped them.
	KeyID string
	// CacheSize bounds the subjects whose clear keys this process keeps
	// (default DefaultCacheSize; least recently used out first).
	CacheSize int
	// CacheTTL is how long a clear key stays cached (default
	// DefaultCacheTTL): after another process forgot a subject, this one
	// opens and seals its values for at most that long.
	CacheTTL time.Duration
	// Now is the clock of the created_at and forgotten_at attributes
	// (default time.Now).
	Now func() time.Time
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

func (c *KeyStoreConfig) setDefaults() {
	if c.Table == "" {
		c.Table = DefaultKeysTable
	}
	if c.KeyID == "" {
		c.KeyID = DefaultKeyID
	}
	if c.CacheSize == 0 {
		c.CacheSize = DefaultCacheSize
	}
	if c.CacheTTL == 0 {
		c.CacheTTL = DefaultCacheTTL
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports the first unusable field.
func (c KeyStoreConfig) Validate() error {
	bad := func(field, reason string) error {
		return fmt.Errorf("privacy: KeyStoreConfig: %w", &eventstore.ValidationError{Field: field, Reason: reason})
	}
	switch {
	case c.DB == nil:
		return bad("DB", "is nil")
	case c.KMS == nil:
		return bad("KMS", "is nil")
	case c.CacheSize < 0:
		return bad("CacheSize", fmt.Sprintf("%d: must not be negative", c.CacheSize))
	case c.CacheTTL < 0:
		return bad("CacheTTL", fmt.Sprintf("%v: must not be negative", c.CacheTTL))
	}
	return nil
}

// DataKey is a subject's clear data key, ready to seal and open its
// values. It never leaves the process.
type DataKey struct {
	subject string
	aead    cipher.AEAD
}

// Subject is whose key it is.
func (k *DataKey) Subject() string { return k.subject }

func newDataKey(subject string, plain []byte) (*DataKey, error) {
	block, err := aes.NewCipher(plain)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &DataKey{subject: subject, aead: aead}, nil
}

// KeyStore keeps each subject's data key, wrapped by the KMS in a
// DynamoDB table and in clear in a bounded cache. It is safe for
// concurrent use, also across processes: two that make the first key of
// a subject at once agree on one (a conditional put; the loser reads the
// winner's).
type KeyStore struct {
	cfg    KeyStoreConfig
	cache  *expirable.LRU[string, *DataKey]
	flight singleflight.Group
	hits   atomic.Int64
	misses atomic.Int64
}

// NewKeyStore returns a KeyStore on cfg (defaults set).
func NewKeyStore(cfg KeyStoreConfig) (*KeyStore, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &KeyStore{cfg: cfg, cache: expirable.NewLRU[string, *DataKey](cfg.CacheSize, nil, cfg.CacheTTL)}, nil
}

// CacheStats are a KeyStore's cache hits and misses since it was made.
type CacheStats struct {
	Hits, Misses int64
}

// HitRatio is hits over look-ups (0 before any).
func (s CacheStats) HitRatio() float64 {
	if s.Hits+s.Misses == 0 {
		return 0
	}
	return float64(s.Hits) / float64(s.Hits+s.Misses)
}

// Stats returns the cache's hits and misses.
func (s *KeyStore) Stats() CacheStats {
	return CacheStats{Hits: s.hits.Load(), Misses: s.misses.Load()}
}

func validSubject(subject string) error {
	switch {
	case subject == "":
		return fmt.Errorf("privacy: %w", &eventstore.ValidationError{Field: "subject", Reason: "is empty"})
	case len(subject) > MaxSubjectLen:
		return fmt.Errorf("privacy: %w", &eventstore.ValidationError{Field: "subject", Reason: fmt.Sprintf("is %d bytes, more than %d", len(subject), MaxSubjectLen)})
	}
	return nil
}

// errNoKey: the subject has never had a key.
var errNoKey = errors.New("no key")

// KeyForSealing returns subject's data key, making it (KMS
// GenerateDataKey, then a conditional put) when the subject has none. A
// forgotten subject is a *ForgottenError; a KMS failure a *KeyError, and
// then nothing was stored.
func (s *KeyStore) KeyForSealing(ctx context.Context, subject string) (*DataKey, error) {
	return s.key(ctx, subject, true)
}

// KeyForOpening returns subject's data key. A forgotten subject, or one
// that never had a key (so no value of it was ever sealed, or it was
// forgotten before its key was written), is a *ForgottenError.
func (s *KeyStore) KeyForOpening(ctx context.Context, subject string) (*DataKey, error) {
	return s.key(ctx, subject, false)
}

func (s *KeyStore) key(ctx context.Context, subject string, create bool) (*DataKey, error) {
	if err := validSubject(subject); err != nil {
		return nil, err
	}
	if k, ok := s.cache.Get(subject); ok {
		s.hits.Add(1)
		return k, nil
	}
	s.misses.Add(1)
	flight := "open\x00" + subject
	if create {
		flight = "seal\x00" + subject
	}
	v, err, _ := s.flight.Do(flight, func() (any, error) {
		k, err := s.load(ctx, subject)
		if errors.Is(err, errNoKey) && create {
			k, err = s.create(ctx, subject)
		}
		if errors.Is(err, errNoKey) {
			err = &ForgottenError{Subject: subject}
		}
		if err != nil {
			return nil, err
		}
		s.cache.Add(subject, k)
		return k, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*DataKey), nil
}

// load reads and unwraps subject's key: errNoKey when it has none, a
// *ForgottenError when it was forgotten.
func (s *KeyStore) load(ctx context.Context, subject string) (*DataKey, error) {
	out, err := s.cfg.DB.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.cfg.Table),
		Key:            map[string]types.AttributeValue{AttrSubject: &types.AttributeValueMemberS{Value: subject}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("privacy: read the key of %s from %s: %w", subject, s.cfg.Table, err)
	}
	if out.Item == nil {
		return nil, errNoKey
	}
	if _, ok := out.Item[AttrForgottenAt]; ok {
		return nil, &ForgottenError{Subject: subject}
	}
	wrapped, ok1 := out.Item[AttrWrapped].(*types.AttributeValueMemberB)
	arn, ok2 := out.Item[AttrKMSKey].(*types.AttributeValueMemberS)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("privacy: %w", &eventstore.DecodeError{What: "key item of " + subject + " in " + s.cfg.Table, Reason: "lacks wrapped or kms_key"})
	}
	plain, err := s.cfg.KMS.Decrypt(ctx, arn.Value, subject, wrapped.Value)
	if err != nil {
		return nil, &KeyError{Subject: subject, Op: "decrypt", KeyID: arn.Value, Err: err}
	}
	return newDataKey(subject, plain)
}

// create makes subject's first key and stores it wrapped, unless another
// process stored one (or a tombstone) first: then that one counts.
func (s *KeyStore) create(ctx context.Context, subject string) (*DataKey, error) {
	plain, wrapped, arn, err := s.cfg.KMS.GenerateDataKey(ctx, s.cfg.KeyID, subject)
	if err != nil {
		return nil, &KeyError{Subject: subject, Op: "generate", KeyID: s.cfg.KeyID, Err: err}
	}
	k, err := newDataKey(subject, plain)
	if err != nil {
		return nil, fmt.Errorf("privacy: the data key of %s: %w", subject, err)
	}
	_, err = s.cfg.DB.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.cfg.Table),
		Item: map[string]types.AttributeValue{
			AttrSubject:   &types.AttributeValueMemberS{Value: subject},
			AttrWrapped:   &types.AttributeValueMemberB{Value: wrapped},
			AttrKMSKey:    &types.AttributeValueMemberS{Value: arn},
			AttrCreatedAt: &types.AttributeValueMemberS{Value: s.cfg.Now().UTC().Format(time.RFC3339Nano)},
		},
		ConditionExpression:      aws.String("attribute_not_exists(#s)"),
		ExpressionAttributeNames: map[string]string{"#s": AttrSubject},
	})
	var lost *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &lost):
		k, err := s.load(ctx, subject) // another writer's key, or its tombstone
		if errors.Is(err, errNoKey) {
			return nil, fmt.Errorf("privacy: the key of %s: the conditional put failed but no item is there", subject)
		}
		return k, err
	case err != nil:
		return nil, fmt.Errorf("privacy: store the key of %s in %s: %w", subject, s.cfg.Table, err)
	}
	s.cfg.Logger.DebugContext(ctx, "made a subject's data key", "subject", subject, "kms_key", arn)
	return k, nil
}

// Forgotten is what Forget did.
type Forgotten struct {
	Subject string
	// HadKey is false when the subject never had a key (a tombstone is
	// written all the same, so that none is ever made for it).
	HadKey bool
	At     time.Time
}

// Forget deletes subject's data key for good: its item becomes a
// tombstone without the wrapped key, so its sealed values can never be
// opened again and no new key is made for it. This process forgets the
// clear key at once; others within their CacheTTL. Forgetting again is a
// no-op that reports the first forgetting's time.
func (s *KeyStore) Forget(ctx context.Context, subject string) (Forgotten, error) {
	if err := validSubject(subject); err != nil {
		return Forgotten{}, err
	}
	s.cache.Remove(subject)
	key := map[string]types.AttributeValue{AttrSubject: &types.AttributeValueMemberS{Value: subject}}
	now := s.cfg.Now().UTC()
	// Replace the item whole unless it is already a tombstone: the
	// wrapped key is not kept anywhere.
	out, err := s.cfg.DB.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.cfg.Table),
		Item: map[string]types.AttributeValue{
			AttrSubject:     key[AttrSubject],
			AttrForgottenAt: &types.AttributeValueMemberS{Value: now.Format(time.RFC3339Nano)},
		},
		ConditionExpression:                 aws.String("attribute_not_exists(#f)"),
		ExpressionAttributeNames:            map[string]string{"#f": AttrForgottenAt},
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var done *types.ConditionalCheckFailedException
	if errors.As(err, &done) {
		at, _ := done.Item[AttrForgottenAt].(*types.AttributeValueMemberS)
		f := Forgotten{Subject: subject}
		if at != nil {
			f.At, _ = time.Parse(time.RFC3339Nano, at.Value)
		}
		return f, nil
	}
	if err != nil {
		return Forgotten{}, fmt.Errorf("privacy: forget %s in %s: %w", subject, s.cfg.Table, err)
	}
	_, had := out.Attributes[AttrWrapped]
	s.cache.Remove(subject) // a look-up that raced the put
	s.cfg.Logger.InfoContext(ctx, "forgot a subject: its data key is deleted", "subject", subject, "had_key", had)
	return Forgotten{Subject: subject, HadKey: had, At: now}, nil
}
