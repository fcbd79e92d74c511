package stack_test

import (
	"bytes"
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"

	"github.com/eventpipe/eventpipe/dev/testenv"
	"github.com/eventpipe/eventpipe/endpoints"
	"github.com/eventpipe/eventpipe/internal/kmsclient"
	kmskey "github.com/eventpipe/eventpipe/migrations/kms"
)

// TestKMSComponentKeepsItsKeys brings a throwaway stack up and checks its
// KMS through the AWS SDK's KMS client: the component runs as a child,
// the alias of EVENTPIPE_KMS_KEY_ID exists and names an enabled
// symmetric key, a data key from GenerateDataKey decrypts to the same
// bytes (and not under another encryption context), a second Up leaves
// the alias on the same key; then a key made by the test and a data key
// wrapped by the alias survive a SIGKILL of the KMS and its restart by
// Up, and a Down and Up.
func TestKMSComponentKeepsItsKeys(t *testing.T) {
	testenv.Integration(t)
	ctx := context.Background()
	var out bytes.Buffer
	s := newThrowawayStack(t, &out)
	if err := s.Up(ctx); err != nil {
		t.Fatalf("up: %v\n%s", err, out.String())
	}
	pid := pids(t, s)["kms"]
	if pid == 0 {
		t.Fatalf("kms has no process after up:\n%s", out.String())
	}
	alias := s.Endpoints().KMSKeyID
	if alias != endpoints.DefaultKMSKeyID || !strings.Contains(out.String(), "with "+alias) {
		t.Fatalf("up did not create %s (key id setting %q):\n%s", endpoints.DefaultKMSKeyID, alias, out.String())
	}
	client, err := kmsclient.New(ctx, kmsclient.Config{Endpoint: s.Endpoints().KMS})
	if err != nil {
		t.Fatal(err)
	}
	subjectsKey := func() string {
		t.Helper()
		desc, err := client.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(alias)})
		if err != nil {
			t.Fatalf("describe %s: %v", alias, err)
		}
		m := desc.KeyMetadata
		if m.KeyState != kmstypes.KeyStateEnabled || m.KeySpec != kmstypes.KeySpecSymmetricDefault || m.KeyUsage != kmstypes.KeyUsageTypeEncryptDecrypt ||
			aws.ToString(m.Description) != kmskey.KeyDescription {
			t.Fatalf("%s is %+v, want the stack's enabled symmetric encryption key", alias, m)
		}
		return aws.ToString(m.KeyId)
	}
	key := subjectsKey()
	aliases, err := client.ListAliases(ctx, &kms.ListAliasesInput{KeyId: aws.String(key)})
	if err != nil || len(aliases.Aliases) != 1 || aws.ToString(aliases.Aliases[0].AliasName) != alias {
		t.Fatalf("aliases of %s: %+v, %v; want %s alone", key, aliases, err, alias)
	}

	// Envelope encryption as the per-subject key store does it.
	subject := map[string]string{"subject": "account-holder/42"}
	dk, err := client.GenerateDataKey(ctx, &kms.GenerateDataKeyInput{KeyId: aws.String(alias), KeySpec: kmstypes.DataKeySpecAes256, EncryptionContext: subject})
	if err != nil {
		t.Fatalf("GenerateDataKey with %s: %v", alias, err)
	}
	if len(dk.Plaintext) != 32 || len(dk.CiphertextBlob) == 0 || bytes.Contains(dk.CiphertextBlob, dk.Plaintext) {
		t.Fatalf("data key: %d plaintext bytes, wrapped in %d bytes", len(dk.Plaintext), len(dk.CiphertextBlob))
	}
	decrypt := func(when string, blob []byte, want []byte) {
		t.Helper()
		got, err := client.Decrypt(ctx, &kms.DecryptInput{CiphertextBlob: blob, EncryptionContext: subject})
		if err != nil {
			t.Fatalf("%s: Decrypt: %v", when, err)
		}
		if !bytes.Equal(got.Plaintext, want) || !strings.HasSuffix(aws.ToString(got.KeyId), key) {
			t.Fatalf("%s: Decrypt gave %x by %s, want %x by %s", when, got.Plaintext, aws.ToString(got.KeyId), want, key)
		}
	}
	decrypt("right after up", dk.CiphertextBlob, dk.Plaintext)
	if _, err := client.Decrypt(ctx, &kms.DecryptInput{CiphertextBlob: dk.CiphertextBlob,
		EncryptionContext: map[string]string{"subject": "account-holder/43"}}); err == nil {
		t.Fatal("a data key decrypted under another subject's encryption context")
	}

	out.Reset()
	if err := s.Up(ctx); err != nil {
		t.Fatalf("second up: %v\n%s", err, out.String())
	}
	if strings.Contains(out.String(), "created") || subjectsKey() != key {
		t.Fatalf("a second up made another key:\n%s", out.String())
	}

	// A key of the test's own, then a kill.
	mine, err := client.CreateKey(ctx, &kms.CreateKeyInput{Description: aws.String("made by the test")})
	if err != nil {
		t.Fatal(err)
	}
	mineID := aws.ToString(mine.KeyMetadata.KeyId)
	sealed, err := client.Encrypt(ctx, &kms.EncryptInput{KeyId: aws.String(mineID), Plaintext: []byte("kept across kills")})
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Gone once reaped (the stack that started it waits for it).
	for deadline := time.Now().Add(30 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("kms (pid %d) still runs 30 s after SIGKILL", pid)
		}
	}
	out.Reset()
	if err := s.Up(ctx); err != nil {
		t.Fatalf("up after the kill: %v\n%s", err, out.String())
	}
	if again := pids(t, s)["kms"]; again == 0 || again == pid || !strings.Contains(out.String(), "kms") {
		t.Fatalf("up after the kill did not restart kms (pid %d, was %d):\n%s", again, pid, out.String())
	}
	check := func(when string) {
		t.Helper()
		if strings.Contains(out.String(), "created") || subjectsKey() != key {
			t.Fatalf("%s: the alias lost its key:\n%s", when, out.String())
		}
		decrypt(when, dk.CiphertextBlob, dk.Plaintext)
		got, err := client.Decrypt(ctx, &kms.DecryptInput{CiphertextBlob: sealed.CiphertextBlob})
		if err != nil || string(got.Plaintext) != "kept across kills" {
			t.Fatalf("%s: decrypt with the test's key: %v", when, err)
		}
		if d, err := client.DescribeKey(ctx, &kms.DescribeKeyInput{KeyId: aws.String(mineID)}); err != nil ||
			aws.ToString(d.KeyMetadata.Description) != "made by the test" {
			t.Fatalf("%s: describe the test's key: %v", when, err)
		}
	}
	check("after a kill")

	out.Reset()
	if err := s.Down(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Up(ctx); err != nil {
		t.Fatalf("up after down: %v\n%s", err, out.String())
	}
	check("after down and up")
}
