package stack

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"syscall"

	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/internal/kmsclient"
	"github.com/eventpipe/eventpipe/internal/probe"
	kmskey "github.com/eventpipe/eventpipe/migrations/kms"
)

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
	key, err := kmskey.EnsureKey(ctx, client, keyID, true)
	switch {
	case err != nil:
		return err
	case !key.Created:
		if key.State != string(kmstypes.KeyStateEnabled) {
			s.printf("%-14s %s is key %s in state %s: GenerateDataKey with it fails until it is enabled", "kms", keyID, key.ID, key.State)
		}
		return nil
	}
	id := key.ID
	s.printf("%-14s created symmetric key %s with %s", "kms", id, keyID)
	return nil
}
