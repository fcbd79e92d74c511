package stack

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/internal/kmsclient"
	"github.com/eventpipe/eventpipe/internal/probe"
)

// SubjectsKeyDescription is the description of the key the stack creates
// behind the alias of EVENTPIPE_KMS_KEY_ID.
const SubjectsKeyDescription = "eventpipe: wraps the per-subject data keys (created by eventpipe stack up)"

// kms is the stack's AWS KMS (dev/kmsserver: Local KMS's key store and
// operations inside the eventpipe binary, on loopback). Its data is in
// <Dir>/data/kms. A non-loopback EVENTPIPE_KMS_ENDPOINT, or "aws", is
// external and left alone.
//
// It takes static credentials in both modes, as DynamoDB Local does: the
// secured mode changes nothing for it.
func (s *Stack) kms() *component {
	ep := s.cfg.Endpoints.KMS
	c := &component{
		name:       "kms",
		addr:       ep,
		envVar:     endpoints.EnvKMS,
		marker:     s.dataDir("kms"),
		stopSignal: syscall.SIGTERM,
		health:     func(ctx context.Context) error { return probe.KMS(ctx, ep) },
	}
	u, err := url.Parse(ep)
	if err != nil || u.Scheme != "http" {
		return c // external (or unusable): health says why
	}
	host, _, loopback := loopbackHostPort(u.Host)
	c.managed = loopback && host == "127.0.0.1"
	c.prepare = func(context.Context) error { return os.MkdirAll(s.dataDir("kms"), 0o755) }
	c.command = func() (*processSpec, error) {
		args := append([]string{}, s.cfg.KMSServerCommand[1:]...)
		args = append(args, "--addr", u.Host, "--data-dir", s.dataDir("kms"))
		return &processSpec{path: s.cfg.KMSServerCommand[0], args: args, env: s.cfg.KMSServerEnv}, nil
	}
	c.afterStart = func(ctx context.Context) error { return s.ensureSubjectsKey(ctx, ep) }
	return c
}

// ensureSubjectsKey makes the key of EVENTPIPE_KMS_KEY_ID exist in the
// stack's KMS: when it names an alias that does not exist yet, a
// symmetric encryption key is created with that alias. Idempotent. A key
// id or ARN is only checked: the stack cannot create a key of a given id.
func (s *Stack) ensureSubjectsKey(ctx context.Context, endpoint string) error {
	keyID := s.cfg.Endpoints.KMSKeyID
	if err := kmsclient.ValidateKeyID(keyID); err != nil {
		return fmt.Errorf("%s: %w", endpoints.EnvKMSKeyID, err)
	}
	client, err := kmsclient.New(ctx, kmsclient.Config{Endpoint: endpoint})
	if err != nil {
		return err
	}
	alias := keyID
	if strings.HasPrefix(alias, "arn:") {
		if _, rest, _ := strings.Cut(alias, ":alias/"); rest != "" {
			alias = "alias/" + rest
		}
	}
	desc, err := client.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(keyID)})
	var notFound *kmstypes.NotFoundException
	switch {
	case err == nil:
		if st := desc.KeyMetadata.KeyState; st != kmstypes.KeyStateEnabled {
			s.printf("%-14s %s is key %s in state %s: GenerateDataKey with it fails until it is enabled", "kms", keyID, aws.ToString(desc.KeyMetadata.KeyId), st)
		}
		return nil
	case !errors.As(err, &notFound):
		return fmt.Errorf("describe key %s: %w", keyID, err)
	case !strings.HasPrefix(alias, "alias/"):
		return fmt.Errorf("%s=%s names a key the stack's KMS does not hold; the stack creates keys only behind an alias (alias/<name>)", endpoints.EnvKMSKeyID, keyID)
	}
	created, err := client.CreateKey(ctx, &kms.CreateKeyInput{
		Description: aws.String(SubjectsKeyDescription),
		KeySpec:     kmstypes.KeySpecSymmetricDefault,
		KeyUsage:    kmstypes.KeyUsageTypeEncryptDecrypt,
	})
	if err != nil {
		return fmt.Errorf("create the key of %s: %w", alias, err)
	}
	id := aws.ToString(created.KeyMetadata.KeyId)
	if _, err := client.CreateAlias(ctx, &kms.CreateAliasInput{AliasName: aws.String(alias), TargetKeyId: aws.String(id)}); err != nil {
		return fmt.Errorf("create alias %s of key %s: %w", alias, id, err)
	}
	s.printf("%-14s created symmetric key %s with %s", "kms", id, alias)
	return nil
}
