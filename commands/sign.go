package commands

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/eventpipe/eventpipe/eventstore"
)

// Metadata keys of a signed command (Signer.SignMessage): the key's id
// and the signature, HMAC-SHA256 under that key over the command's
// canonical bytes.
const (
	MetadataSignature = "eventpipe_command_signature"
	MetadataKeyID     = "eventpipe_command_key_id"
)

// DeploymentKeyID is the key id of the deployment's command key, the one
// the sagas sign with (SignedIDs.Key). Only it may sign a command under a
// reserved id; producer keys (DispatcherConfig.Keys) use other ids.
const DeploymentKeyID = "eventpipe"

// Refusal codes of commands refused for their signature. They are
// answered StatusInvalid, poisoned, and never recorded under the command
// id, so the id stays free for the genuine command.
const (
	// ErrUnsigned: the command handlers require signed commands
	// (DispatcherConfig.RequireSigned) and this one is not signed.
	ErrUnsigned eventstore.Code = "commands.unsigned"
	// ErrBadSignature: the command's signature does not verify: an
	// unknown key id, or a command changed after it was signed (its
	// payload, expected version, reply topic, actor…).
	ErrBadSignature eventstore.Code = "commands.bad_signature"
	// ErrReservedID: the command is under a saga's id and not signed
	// with the deployment's key (ErrUnsignedReservedID).
	ErrReservedID eventstore.Code = "commands.reserved_id"
)

// ErrUnsignedReservedID is wrapped by the *InvalidError of a command sent
// under a reserved id (a saga's, see SignedIDs) without a valid signature
// under the deployment's key (DeploymentKeyID).
var ErrUnsignedReservedID = errors.New("command id is reserved for a saga and the command is not signed with the deployment's command key")

// SignedIDs says which command ids only holders of a key may use: the
// ids starting with one of Prefixes (a saga's "<name>.": see
// sagas.CommandID) must come with a signature under Key (key id
// DeploymentKeyID).
type SignedIDs struct {
	// Key is the deployment's command key (at least 32 bytes); empty: no
	// id is reserved.
	Key []byte
	// Prefixes start the reserved ids.
	Prefixes []string
}

// MinKeyLength is the shortest command key SignedIDs, Keys and sagas
// accept.
const MinKeyLength = 32

// Reserved reports whether id is reserved.
func (s SignedIDs) Reserved(id string) bool {
	if len(s.Key) == 0 {
		return false
	}
	for _, p := range s.Prefixes {
		if strings.HasPrefix(id, p) {
			return true
		}
	}
	return false
}

// Keys are the producer keys the command handlers verify signed commands
// with, by key id: one per producer (a service, a team's tool), so that
// a key can be revoked alone. A key id is 1–64 of [A-Za-z0-9._-] and not
// DeploymentKeyID; a key has at least MinKeyLength bytes.
type Keys map[string][]byte

// Validate reports the first bad key id or key as an
// *eventstore.ValidationError naming it.
func (k Keys) Validate() error {
	for id, key := range k {
		field := "Keys[" + strconv.Quote(id) + "]"
		if err := validKeyID(id); err != nil {
			return &eventstore.ValidationError{Field: field, Reason: err.Error()}
		}
		if id == DeploymentKeyID {
			return &eventstore.ValidationError{Field: field, Reason: "is the deployment key's id: give the deployment key as the command key"}
		}
		if len(key) < MinKeyLength {
			return &eventstore.ValidationError{Field: field, Reason: fmt.Sprintf("has %d bytes, want at least %d", len(key), MinKeyLength)}
		}
	}
	return nil
}

func validKeyID(id string) error {
	if id == "" || len(id) > 64 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != "" {
		return fmt.Errorf("key id %q: want 1 to 64 of [A-Za-z0-9._-]", id)
	}
	return nil
}

// ParseKeys reads producer keys from text, one "<key id> <key>" a line
// (blank lines and lines starting with '#' are skipped): the format of
// EVENTPIPE_COMMAND_PRODUCER_KEYS(_FILE). Errors name the line, never the
// key.
func ParseKeys(text string) (Keys, error) {
	out := Keys{}
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, key, ok := strings.Cut(line, " ")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return nil, &eventstore.ValidationError{Field: fmt.Sprintf("line %d", n+1), Reason: "want \"<key id> <key>\""}
		}
		if _, dup := out[id]; dup {
			return nil, &eventstore.ValidationError{Field: fmt.Sprintf("line %d", n+1), Reason: fmt.Sprintf("key id %q given twice", id)}
		}
		out[id] = []byte(key)
	}
	if err := out.Validate(); err != nil {
		return nil, err
	}
	return out, nil
}

// Signer signs commands with one key: a producer's (KeyID one of the
// command handlers' Keys) or the deployment's (DeploymentKeyID). Its zero
// value signs nothing. Safe for concurrent use.
type Signer struct {
	KeyID string
	Key   []byte
}

// Enabled reports whether s has a key.
func (s Signer) Enabled() bool { return len(s.Key) > 0 }

// Validate reports a bad key id or a short key (fields "Signer.KeyID",
// "Signer.Key").
func (s Signer) Validate() error {
	if !s.Enabled() {
		return nil
	}
	if err := validKeyID(s.KeyID); err != nil {
		return &eventstore.ValidationError{Field: "Signer.KeyID", Reason: err.Error()}
	}
	if len(s.Key) < MinKeyLength {
		return &eventstore.ValidationError{Field: "Signer.Key", Reason: fmt.Sprintf("has %d bytes, want at least %d", len(s.Key), MinKeyLength)}
	}
	return nil
}

// SignMessage sets the key id and the signature of cmd, the command msg
// carries, on msg. Call it after every other metadata is set: the reply
// topic (MetadataReplyTo) is signed. It returns the signature, which the
// answer's Result.Signature is bound to (VerifyResult).
func (s Signer) SignMessage(msg *message.Message, cmd Command) string {
	sig := SignCommand(s.Key, cmd, msg.Metadata.Get(MetadataReplyTo))
	msg.Metadata.Set(MetadataKeyID, s.KeyID)
	msg.Metadata.Set(MetadataSignature, sig)
	return sig
}

// SignCommand returns cmd's signature under key, with replyTo the
// command message's MetadataReplyTo ("" when it has none): HMAC-SHA256,
// hex-encoded, over everything that gives the command its meaning: id,
// type, aggregate type and id, payload (compact JSON), expected version,
// reply topic, actor, IP and issue time. Changing any of them breaks it.
func SignCommand(key []byte, cmd Command, replyTo string) string {
	mac := hmac.New(sha256.New, key)
	writeCanonical(mac, cmd, replyTo)
	return hex.EncodeToString(mac.Sum(nil))
}

// VerifyCommand reports whether signature is cmd's under key with
// replyTo (in constant time).
func VerifyCommand(key []byte, cmd Command, replyTo, signature string) bool {
	got, err := hex.DecodeString(signature)
	if err != nil || len(key) == 0 {
		return false
	}
	mac := hmac.New(sha256.New, key)
	writeCanonical(mac, cmd, replyTo)
	return hmac.Equal(got, mac.Sum(nil))
}

// writeCanonical writes cmd's canonical bytes: a version tag, then each
// field length-prefixed, so no two commands share them.
func writeCanonical(h hash.Hash, cmd Command, replyTo string) {
	version := ""
	if cmd.ExpectedVersion != nil {
		version = strconv.FormatInt(*cmd.ExpectedVersion, 10)
	}
	issued := ""
	if !cmd.IssuedAt.IsZero() {
		issued = cmd.IssuedAt.UTC().Format(time.RFC3339Nano)
	}
	writeParts(h, "eventpipe.command.v2", cmd.ID, cmd.Type, cmd.AggregateType, cmd.AggregateID,
		canonicalPayload(cmd.Payload), version, replyTo, cmd.Actor, cmd.IP, issued)
}

// writeParts writes each part length-prefixed (uvarint), so that no two
// lists of parts write the same bytes.
func writeParts(h hash.Hash, parts ...string) {
	for _, part := range parts {
		var n [binary.MaxVarintLen64]byte
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(part)))])
		h.Write([]byte(part))
	}
}

// canonicalPayload is the payload as json.Marshal writes it into a
// command's body (compact, HTML characters escaped), so that a signature
// made before encoding verifies after decoding.
func canonicalPayload(p json.RawMessage) string {
	var compact, escaped bytes.Buffer
	if err := json.Compact(&compact, p); err != nil {
		return string(p)
	}
	json.HTMLEscape(&escaped, compact.Bytes())
	return escaped.String()
}

// SignResult returns the signature of res, the answer to the command
// whose signature is commandSignature, under key (the key that signed
// the command): the command handlers set it as res.Signature, so the
// sender knows the answer is to the command it sent and comes from a
// holder of the key.
func SignResult(key []byte, commandSignature string, res Result) string {
	mac := hmac.New(sha256.New, key)
	parts := []string{"eventpipe.result.v1", commandSignature, res.CommandID, string(res.Status), string(res.Code), res.Reason,
		res.AggregateType, res.AggregateID, strconv.FormatInt(res.Version, 10), strconv.FormatBool(res.Duplicate)}
	writeParts(mac, append(parts, res.EventIDs...)...)
	return hex.EncodeToString(mac.Sum(nil))
}

// VerifyResult reports whether res carries the signature SignResult gives
// it as the answer to the command signed commandSignature under key.
func VerifyResult(key []byte, commandSignature string, res Result) bool {
	got, err := hex.DecodeString(res.Signature)
	if err != nil || len(key) == 0 {
		return false
	}
	want, _ := hex.DecodeString(SignResult(key, commandSignature, res))
	return hmac.Equal(got, want)
}
