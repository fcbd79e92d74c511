package privacy

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/eventpipe/eventpipe/eventstore"
)

// unreachable is a keys table and a KMS that fail the test when used: the
// refusals below come before any key is looked up.
type unreachable struct{ t *testing.T }

func (u unreachable) fail() error {
	u.t.Helper()
	u.t.Fatal("the keys table or the KMS was used")
	return nil
}
func (u unreachable) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return nil, u.fail()
}
func (u unreachable) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return nil, u.fail()
}
func (u unreachable) UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return nil, u.fail()
}
func (u unreachable) Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return nil, u.fail()
}
func (u unreachable) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return nil, u.fail()
}
func (u unreachable) GenerateDataKey(context.Context, string, string) ([]byte, []byte, string, error) {
	return nil, nil, "", u.fail()
}
func (u unreachable) Decrypt(context.Context, string, string, []byte) ([]byte, error) {
	return nil, u.fail()
}

func TestPersonalDeclarationsAndPayloadsRefused(t *testing.T) {
	for name, p := range map[string]Personal{
		"no subject per subject": {Fields: []string{"/a"}, KeyPerSubject: true},
		"two subjects":           {Subject: "/o", SubjectIsAggregate: true, Fields: []string{"/a"}},
		"no field":               {Subject: "/o"},
		"not a pointer":          {Subject: "/o", Fields: []string{"a"}},
		"subject is personal":    {Subject: "/o", Fields: []string{"/o"}},
		"field twice":            {Subject: "/o", Fields: []string{"/a", "/a"}},
		"empty reference part":   {Subject: "/o", Fields: []string{"/a//b"}},
	} {
		var ve *eventstore.ValidationError
		if err := p.Validate(); !errors.As(err, &ve) {
			t.Errorf("%s: Validate = %v, want a ValidationError", name, err)
		}
	}
	ctx := context.Background()
	keys, err := NewKeyStore(KeyStoreConfig{DB: unreachable{t}, KMS: unreachable{t}})
	if err != nil {
		t.Fatal(err)
	}
	p := Personal{Subject: "/owner", Fields: []string{"/title"}}
	b := Binding{AggregateType: "todo", AggregateID: "t1", Item: "event/TodoCreated/1"}
	for name, payload := range map[string]string{
		"numeric subject":  `{"owner":7,"title":"x"}`,
		"non-string field": `{"owner":"alice","title":{"a":1}}`,
		"not an object":    `["owner"]`,
		"trailing garbage": `{"owner":"alice"} {}`,
	} {
		if _, err := SealPayload(ctx, keys, p, b, []byte(payload)); !eventstore.IsPermanent(err) {
			t.Errorf("%s: SealPayload = %v, want a permanent error", name, err)
		}
	}
	if _, _, err := OpenPayload(ctx, keys, p, b, []byte(`{"owner":"alice","title":"in clear"}`)); !errors.Is(err, eventstore.ErrMalformed) {
		t.Errorf("open a personal field in clear: %v, want a DecodeError", err)
	}
}
