// Package kms makes sure the KMS key that wraps the data subjects' keys
// (package privacy) is there: `eventpipe migrate` and `eventpipe stack up`
// call EnsureKey.
package kms

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/eventpipe/eventpipe/eventstore"
)

// API is what EnsureKey needs of a KMS client.
type API interface {
	DescribeKey(ctx context.Context, in *kms.DescribeKeyInput, optFns ...func(*kms.Options)) (*kms.DescribeKeyOutput, error)
	CreateKey(ctx context.Context, in *kms.CreateKeyInput, optFns ...func(*kms.Options)) (*kms.CreateKeyOutput, error)
	CreateAlias(ctx context.Context, in *kms.CreateAliasInput, optFns ...func(*kms.Options)) (*kms.CreateAliasOutput, error)
}

// KeyDescription is the description of a key EnsureKey creates.
const KeyDescription = "eventpipe: wraps the per-subject data keys"

// Key is what EnsureKey found or made.
type Key struct {
	// ID is the key's id; Created is set when EnsureKey made it.
	ID      string
	Created bool
	// State is the key's state (Enabled, Disabled, PendingDeletion…).
	State string
}

// EnsureKey makes sure keyID (a key id, ARN, alias or alias ARN) names a
// key. When it does not and create is set, and keyID names an alias, a
// symmetric encryption key is created behind that alias (for a local KMS:
// keys of AWS KMS are made by the operator, with their policy). A key
// that is missing and cannot be created is an *eventstore.ValidationError
// naming keyID; a key that is not enabled is reported in Key.State, not
// as an error (it may be enabled again).
func EnsureKey(ctx context.Context, client API, keyID string, create bool) (Key, error) {
	desc, err := client.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(keyID)})
	var notFound *kmstypes.NotFoundException
	switch {
	case err == nil:
		return Key{ID: aws.ToString(desc.KeyMetadata.KeyId), State: string(desc.KeyMetadata.KeyState)}, nil
	case !errors.As(err, &notFound):
		return Key{}, fmt.Errorf("kms: describe key %s: %w", keyID, err)
	}
	alias := keyID
	if strings.HasPrefix(alias, "arn:") {
		if _, rest, _ := strings.Cut(alias, ":alias/"); rest != "" {
			alias = "alias/" + rest
		}
	}
	switch {
	case !create:
		return Key{}, fmt.Errorf("kms: %w", &eventstore.ValidationError{Field: "kms key " + keyID, Reason: "does not exist: create it (a symmetric encryption key) and give the pipeline's roles kms:GenerateDataKey and kms:Decrypt on it"})
	case !strings.HasPrefix(alias, "alias/"):
		return Key{}, fmt.Errorf("kms: %w", &eventstore.ValidationError{Field: "kms key " + keyID, Reason: "does not exist, and only a key behind an alias (alias/<name>) can be created"})
	}
	created, err := client.CreateKey(ctx, &kms.CreateKeyInput{
		Description: aws.String(KeyDescription),
		KeySpec:     kmstypes.KeySpecSymmetricDefault,
		KeyUsage:    kmstypes.KeyUsageTypeEncryptDecrypt,
	})
	if err != nil {
		return Key{}, fmt.Errorf("kms: create the key of %s: %w", alias, err)
	}
	id := aws.ToString(created.KeyMetadata.KeyId)
	if _, err := client.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: aws.String(id)}); err != nil {
		return Key{}, fmt.Errorf("kms: create alias %s of key %s: %w", alias, id, err)
	}
	return Key{ID: id, Created: true, State: string(kmstypes.KeyStateEnabled)}, nil
}
