package privacy

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// memKMS and memTable stand in for KMS and the keys table in the pure
// unit tests of this package (the KeyStore's own tests run on the
// stack's DynamoDB Local and local KMS).
type memKMS struct {
	mu    sync.Mutex
	keys  map[string][]byte // wrapped → plain
	calls int
}

func (k *memKMS) GenerateDataKey(_ context.Context, keyID, subject string) ([]byte, []byte, string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls++
	plain, wrapped := make([]byte, 32), make([]byte, 48)
	_, _ = rand.Read(plain)
	_, _ = rand.Read(wrapped)
	if k.keys == nil {
		k.keys = map[string][]byte{}
	}
	k.keys[subject+"\x00"+string(wrapped)] = plain
	return plain, wrapped, "arn:aws:kms:local:0:key/" + keyID, nil
}

func (k *memKMS) Decrypt(_ context.Context, _, subject string, wrapped []byte) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls++
	plain, ok := k.keys[subject+"\x00"+string(wrapped)]
	if !ok {
		return nil, errors.New("InvalidCiphertextException")
	}
	return plain, nil
}

type memTable struct {
	mu    sync.Mutex
	items map[string]map[string]types.AttributeValue
}

func (m *memTable) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := in.Key[AttrSubject].(*types.AttributeValueMemberS).Value
	return &dynamodb.GetItemOutput{Item: m.items[k]}, nil
}

// PutItem knows the two conditions KeyStore writes: no item yet (a new
// key) and no forgotten_at yet (a tombstone).
func (m *memTable) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.items == nil {
		m.items = map[string]map[string]types.AttributeValue{}
	}
	k := in.Item[AttrSubject].(*types.AttributeValueMemberS).Value
	old, exists := m.items[k]
	attr := in.ExpressionAttributeNames["#s"]
	if attr == "" {
		attr = in.ExpressionAttributeNames["#f"]
	}
	if _, has := old[attr]; exists && has && aws.ToString(in.ConditionExpression) != "" {
		return nil, &types.ConditionalCheckFailedException{Item: old}
	}
	m.items[k] = in.Item
	return &dynamodb.PutItemOutput{Attributes: old}, nil
}
