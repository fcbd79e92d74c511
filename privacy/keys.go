package privacy

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"
	"log/slog"
	"strings"
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
	// MaxIDLen bounds a subject's or a scope's id (each is part of a
	// DynamoDB key, and a scope travels in every sealed value).
	MaxIDLen = 256
)

// The keys table: hash key AttrPK and range key AttrSK. It holds three
// kinds of item:
//
//   - a scope's data key: pk "key#<scope>", sk "key", with AttrWrapped,
//     AttrKMSKey, AttrOwner and AttrCreatedAt; once its subject is
//     forgotten, AttrForgottenAt instead of AttrWrapped;
//   - a subject's scope: pk "subject#<subject>", sk "scope#<scope>";
//   - a forgotten subject's tombstone: pk "subject#<subject>", sk
//     "forgotten", with AttrForgottenAt.
const (
	AttrPK          = "pk"
	AttrSK          = "sk"
	AttrWrapped     = "wrapped"      // the data key wrapped by the KMS key (B)
	AttrKMSKey      = "kms_key"      // the ARN of the KMS key that wrapped it
	AttrOwner       = "subject"      // whose data the scope's key seals
	AttrCreatedAt   = "created_at"   // RFC 3339
	AttrForgottenAt = "forgotten_at" // RFC 3339
)

const (
	skKey       = "key"
	skForgotten = "forgotten"
)

func keyPK(scope string) string       { return "key#" + scope }
func subjectPK(subject string) string { return "subject#" + subject }
func scopeSK(scope string) string     { return "scope#" + scope }

// DynamoDBAPI is what a KeyStore needs of a DynamoDB client.
type DynamoDBAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// KeyStoreConfig configures a KeyStore.
type KeyStoreConfig struct {
	// DB holds the keys table. Required.
	DB DynamoDBAPI
	// Table is the keys table (default DefaultKeysTable;
	// migrations/dynamodb.CreateSubjectKeysTable makes it).
	Table string
	// KMS makes and unwraps the data keys. Required.
	KMS KMS
	// KeyID is the KMS key new data keys are wrapped by: an id, ARN or
	// alias (default DefaultKeyID). Keys made before a change keep the
	// KMS key that wrapped them.
	KeyID string
	// CacheSize bounds the scopes whose clear keys this process keeps
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

// DataKey is a scope's clear data key, ready to seal and open the
// values of its subject in that scope. It never leaves the process.
type DataKey struct {
	scope, subject string
	aead           cipher.AEAD
}

// Scope is the key's scope.
func (k *DataKey) Scope() string { return k.scope }

// Subject is whose data the key seals.
func (k *DataKey) Subject() string { return k.subject }

func newDataKey(scope, subject string, plain []byte) (*DataKey, error) {
	block, err := aes.NewCipher(plain)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &DataKey{scope: scope, subject: subject, aead: aead}, nil
}

// KeyStore keeps the data keys: one per scope (an aggregate, or a
// subject's analytics), each sealing one subject's data, made by the KMS
// and stored wrapped in a DynamoDB table, kept in clear in a bounded
// cache. Forgetting a subject deletes every key of its scopes. It is safe
// for concurrent use, also across processes: a scope's first key is
// made in one transaction with its subject's index entry, on the
// condition that the subject is not forgotten, so two makers agree on
// one key and none slips past a forgetting.
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

func validID(field, id string) error {
	switch {
	case id == "":
		return fmt.Errorf("privacy: %w", &eventstore.ValidationError{Field: field, Reason: "is empty"})
	case len(id) > MaxIDLen:
		return fmt.Errorf("privacy: %w", &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf("is %d bytes, more than %d", len(id), MaxIDLen)})
	case strings.ContainsRune(id, 0):
		return fmt.Errorf("privacy: %w", &eventstore.ValidationError{Field: field, Reason: "holds a NUL byte"})
	}
	return nil
}

// errNoKey: the scope has never had a key.
var errNoKey = errors.New("no key")

// KeyForSealing returns scope's data key, making it for subject when the
// scope has none (KMS GenerateDataKey, then one transaction). subject
// may be empty when the scope's key already exists (an aggregate's
// later events need not name it). A forgotten subject is a
// *ForgottenError; a KMS failure a *KeyError, and then nothing was
// stored.
func (s *KeyStore) KeyForSealing(ctx context.Context, scope, subject string) (*DataKey, error) {
	return s.cached(scope, "seal", func() (*DataKey, error) {
		k, err := s.load(ctx, scope)
		if !errors.Is(err, errNoKey) {
			return k, err
		}
		if subject == "" {
			return nil, fmt.Errorf("privacy: %w", &eventstore.ValidationError{Field: "subject", Reason: "is empty, and scope " + scope + " has no key yet to seal with: the first personal data of a scope must name its subject"})
		}
		if err := validID("subject", subject); err != nil {
			return nil, err
		}
		return s.create(ctx, scope, subject)
	})
}

// KeyForOpening returns scope's data key. A scope whose subject was
// forgotten is a *ForgottenError. A scope without any key item (never a
// key, not even a forgotten one: the value was sealed with another keys
// table, or the table was restored from an older backup) is a *KeyError
// (Op "find"): not permanent, so that a misconfigured process retries
// and shows it rather than take the data for forgotten.
func (s *KeyStore) KeyForOpening(ctx context.Context, scope string) (*DataKey, error) {
	return s.cached(scope, "open", func() (*DataKey, error) {
		k, err := s.load(ctx, scope)
		if errors.Is(err, errNoKey) {
			return nil, &KeyError{Scope: scope, Op: "find", KeyID: s.cfg.KeyID,
				Err: fmt.Errorf("the keys table %s has no key of %s, neither live nor forgotten (is this the keys table the data was sealed with?)", s.cfg.Table, scope)}
		}
		return k, err
	})
}

// KeyIfAny returns scope's data key, or nil when the scope has never had
// one (nothing of it was sealed). A scope whose subject was forgotten is
// a *ForgottenError. A key found is cached; the absence of one is not.
func (s *KeyStore) KeyIfAny(ctx context.Context, scope string) (*DataKey, error) {
	k, err := s.cached(scope, "any", func() (*DataKey, error) { return s.load(ctx, scope) })
	if errors.Is(err, errNoKey) {
		return nil, nil
	}
	return k, err
}

// cached returns scope's key from the cache, or from fetch (one call at
// a time per scope and purpose in this process), caching what it gives.
func (s *KeyStore) cached(scope, purpose string, fetch func() (*DataKey, error)) (*DataKey, error) {
	if err := validID("scope", scope); err != nil {
		return nil, err
	}
	if k, ok := s.cache.Get(scope); ok {
		s.hits.Add(1)
		return k, nil
	}
	s.misses.Add(1)
	v, err, _ := s.flight.Do(purpose+"\x00"+scope, func() (any, error) {
		k, err := fetch()
		if err != nil {
			return nil, err
		}
		s.cache.Add(scope, k)
		return k, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*DataKey), nil
}

func itemKey(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrPK: &types.AttributeValueMemberS{Value: pk},
		AttrSK: &types.AttributeValueMemberS{Value: sk},
	}
}

func str(item map[string]types.AttributeValue, attr string) string {
	if v, ok := item[attr].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// load reads and unwraps scope's key: errNoKey when it has none, a
// *ForgottenError when its subject was forgotten.
func (s *KeyStore) load(ctx context.Context, scope string) (*DataKey, error) {
	out, err := s.cfg.DB.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.cfg.Table), Key: itemKey(keyPK(scope), skKey), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("privacy: read the key of %s from %s: %w", scope, s.cfg.Table, err)
	}
	if out.Item == nil {
		return nil, errNoKey
	}
	subject := str(out.Item, AttrOwner)
	if _, ok := out.Item[AttrForgottenAt]; ok {
		return nil, &ForgottenError{Subject: subject, Scope: scope}
	}
	wrapped, ok := out.Item[AttrWrapped].(*types.AttributeValueMemberB)
	arn := str(out.Item, AttrKMSKey)
	if !ok || arn == "" || subject == "" {
		return nil, fmt.Errorf("privacy: %w", &eventstore.DecodeError{What: "key item of " + scope + " in " + s.cfg.Table, Reason: "lacks wrapped, kms_key or subject"})
	}
	plain, err := s.cfg.KMS.Decrypt(ctx, arn, scope, wrapped.Value)
	if err != nil {
		return nil, &KeyError{Scope: scope, Op: "decrypt", KeyID: arn, Err: err}
	}
	return newDataKey(scope, subject, plain)
}

// create makes scope's first key for subject and stores it wrapped, with
// the subject's index entry, unless the subject is forgotten (a
// *ForgottenError) or another process stored the scope's key first
// (then that one counts).
func (s *KeyStore) create(ctx context.Context, scope, subject string) (*DataKey, error) {
	plain, wrapped, arn, err := s.cfg.KMS.GenerateDataKey(ctx, s.cfg.KeyID, scope)
	if err != nil {
		return nil, &KeyError{Scope: scope, Op: "generate", KeyID: s.cfg.KeyID, Err: err}
	}
	k, err := newDataKey(scope, subject, plain)
	if err != nil {
		return nil, fmt.Errorf("privacy: the data key of %s: %w", scope, err)
	}
	now := &types.AttributeValueMemberS{Value: s.cfg.Now().UTC().Format(time.RFC3339Nano)}
	keyItem := itemKey(keyPK(scope), skKey)
	keyItem[AttrWrapped] = &types.AttributeValueMemberB{Value: wrapped}
	keyItem[AttrKMSKey] = &types.AttributeValueMemberS{Value: arn}
	keyItem[AttrOwner] = &types.AttributeValueMemberS{Value: subject}
	keyItem[AttrCreatedAt] = now
	member := itemKey(subjectPK(subject), scopeSK(scope))
	member[AttrCreatedAt] = now
	table := aws.String(s.cfg.Table)
	notExists := aws.String("attribute_not_exists(#pk)")
	names := map[string]string{"#pk": AttrPK}
	_, err = s.cfg.DB.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{ConditionCheck: &types.ConditionCheck{TableName: table, Key: itemKey(subjectPK(subject), skForgotten),
			ConditionExpression: notExists, ExpressionAttributeNames: names}},
		{Put: &types.Put{TableName: table, Item: keyItem, ConditionExpression: notExists, ExpressionAttributeNames: names}},
		{Put: &types.Put{TableName: table, Item: member}},
	}})
	var cancelled *types.TransactionCanceledException
	switch {
	case errors.As(err, &cancelled):
		reasons := cancelled.CancellationReasons
		if len(reasons) > 0 && aws.ToString(reasons[0].Code) == "ConditionalCheckFailed" {
			return nil, &ForgottenError{Subject: subject, Scope: scope}
		}
		if len(reasons) > 1 && aws.ToString(reasons[1].Code) == "ConditionalCheckFailed" {
			return s.load(ctx, scope) // another writer's key
		}
		return nil, fmt.Errorf("privacy: store the key of %s in %s: %w", scope, s.cfg.Table, err)
	case err != nil:
		return nil, fmt.Errorf("privacy: store the key of %s in %s: %w", scope, s.cfg.Table, err)
	}
	s.cfg.Logger.DebugContext(ctx, "made a data key", "scope", scope, "subject", subject, "kms_key", arn)
	return k, nil
}

// Scopes returns the scopes whose keys seal subject's data.
func (s *KeyStore) Scopes(ctx context.Context, subject string) ([]string, error) {
	if err := validID("subject", subject); err != nil {
		return nil, err
	}
	var scopes []string
	p := dynamodb.NewQueryPaginator(s.cfg.DB, &dynamodb.QueryInput{
		TableName:                 aws.String(s.cfg.Table),
		KeyConditionExpression:    aws.String("#pk = :pk AND begins_with(#sk, :scope)"),
		ExpressionAttributeNames:  map[string]string{"#pk": AttrPK, "#sk": AttrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: subjectPK(subject)}, ":scope": &types.AttributeValueMemberS{Value: "scope#"}},
		ConsistentRead:            aws.Bool(true),
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("privacy: list the scopes of %s in %s: %w", subject, s.cfg.Table, err)
		}
		for _, it := range page.Items {
			scopes = append(scopes, strings.TrimPrefix(str(it, AttrSK), "scope#"))
		}
	}
	return scopes, nil
}

// Forgotten is what Forget did.
type Forgotten struct {
	Subject string
	// Scopes are the subject's scopes; Erased those whose key this call
	// deleted (fewer when an earlier call had deleted some).
	Scopes, Erased int
	// At is when the subject was first forgotten.
	At time.Time
}

// Forget forgets subject for good: first its tombstone, so that no new
// key is made for it from then on, then every key of its scopes becomes
// a tombstone without the wrapped key, so that its sealed values can
// never be opened again. This process drops the clear keys at once;
// others within their CacheTTL. Calling it again (after a crash half
// way, or to be sure) completes what is left and reports the first
// forgetting's time.
func (s *KeyStore) Forget(ctx context.Context, subject string) (Forgotten, error) {
	if err := validID("subject", subject); err != nil {
		return Forgotten{}, err
	}
	table := aws.String(s.cfg.Table)
	at := s.cfg.Now().UTC()
	stamp := &types.AttributeValueMemberS{Value: at.Format(time.RFC3339Nano)}
	tomb := itemKey(subjectPK(subject), skForgotten)
	tomb[AttrForgottenAt] = stamp
	_, err := s.cfg.DB.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: table, Item: tomb,
		ConditionExpression: aws.String("attribute_not_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": AttrPK},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var again *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &again):
		if first, err := time.Parse(time.RFC3339Nano, str(again.Item, AttrForgottenAt)); err == nil {
			at = first
		}
	case err != nil:
		return Forgotten{}, fmt.Errorf("privacy: forget %s in %s: %w", subject, s.cfg.Table, err)
	}
	// Every key made before the tombstone is in the subject's index
	// (same transaction); none can be made after it.
	scopes, err := s.Scopes(ctx, subject)
	if err != nil {
		return Forgotten{}, fmt.Errorf("privacy: forget %s: %w", subject, err)
	}
	f := Forgotten{Subject: subject, Scopes: len(scopes), At: at}
	for _, scope := range scopes {
		s.cache.Remove(scope)
		_, err := s.cfg.DB.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: table, Key: itemKey(keyPK(scope), skKey),
			UpdateExpression:          aws.String("REMOVE #w SET #f = :at"),
			ConditionExpression:       aws.String("attribute_exists(#w)"),
			ExpressionAttributeNames:  map[string]string{"#w": AttrWrapped, "#f": AttrForgottenAt},
			ExpressionAttributeValues: map[string]types.AttributeValue{":at": stamp},
		})
		var gone *types.ConditionalCheckFailedException
		switch {
		case errors.As(err, &gone):
			continue // erased by an earlier call
		case err != nil:
			return f, fmt.Errorf("privacy: forget %s: erase the key of %s (call Forget again to finish): %w", subject, scope, err)
		}
		f.Erased++
		s.cache.Remove(scope) // a look-up that raced the update
	}
	s.cfg.Logger.InfoContext(ctx, "forgot a subject: its data keys are deleted", "subject", subject, "scopes", f.Scopes, "erased", f.Erased)
	return f, nil
}
