package privacy

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/aws/aws-sdk-go-v2/service/kms/types"
)

// ContextScope is the KMS encryption context key under which each
// wrapped data key names its scope: KMS unwraps it only for the same
// scope, so a wrapped key copied to another scope's item is refused, and
// CloudTrail shows which key each call touched.
const ContextScope = "eventpipe:scope"

// KMS makes and unwraps data keys. AWSKMS is the one for AWS KMS and for
// the stack's local KMS.
type KMS interface {
	// GenerateDataKey returns a new 256-bit data key for scope, in clear
	// and wrapped by the KMS key keyID (an id, ARN or alias), and the ARN
	// of the KMS key that wrapped it (what Decrypt needs, whatever keyID
	// names later).
	GenerateDataKey(ctx context.Context, keyID, scope string) (plain, wrapped []byte, keyARN string, err error)
	// Decrypt unwraps a data key that GenerateDataKey made for scope
	// with the KMS key keyARN.
	Decrypt(ctx context.Context, keyARN, scope string, wrapped []byte) ([]byte, error)
}

// AWSKMS is KMS on the AWS KMS API, through the AWS SDK's client (AWS
// itself, or a local endpoint speaking the same API).
type AWSKMS struct {
	Client *kms.Client
}

// GenerateDataKey asks for an AES-256 data key under keyID, with the
// scope as encryption context.
func (k AWSKMS) GenerateDataKey(ctx context.Context, keyID, scope string) ([]byte, []byte, string, error) {
	out, err := k.Client.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{
		KeyId:             aws.String(keyID),
		KeySpec:           types.DataKeySpecAes256,
		EncryptionContext: map[string]string{ContextScope: scope},
	})
	if err != nil {
		return nil, nil, "", err
	}
	if len(out.Plaintext) != 32 || len(out.CiphertextBlob) == 0 || aws.ToString(out.KeyId) == "" {
		return nil, nil, "", fmt.Errorf("kms answered a %d-byte key, a %d-byte wrapped key and key id %q, want 32 bytes, some and an ARN", len(out.Plaintext), len(out.CiphertextBlob), aws.ToString(out.KeyId))
	}
	return out.Plaintext, out.CiphertextBlob, aws.ToString(out.KeyId), nil
}

// Decrypt unwraps wrapped, naming keyARN (so that a blob of another key
// is refused) and the scope's encryption context.
func (k AWSKMS) Decrypt(ctx context.Context, keyARN, scope string, wrapped []byte) ([]byte, error) {
	out, err := k.Client.Decrypt(ctx, &kms.DecryptInput{
		KeyId:             aws.String(keyARN),
		CiphertextBlob:    wrapped,
		EncryptionContext: map[string]string{ContextScope: scope},
	})
	if err != nil {
		return nil, err
	}
	if len(out.Plaintext) != 32 {
		return nil, errors.New("kms unwrapped a data key that is not 32 bytes")
	}
	return out.Plaintext, nil
}
