package commands

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
)

// MetadataSignature is the message metadata key of a command's signature
// (SignCommand): the proof that a command sent under a reserved id came
// from a process holding the deployment's command key.
const MetadataSignature = "eventpipe_command_signature"

// ErrUnsignedReservedID is wrapped by the *InvalidError of a command sent
// under a reserved id (a saga's, see SignedIDs) without a valid signature.
var ErrUnsignedReservedID = errors.New("command id is reserved for a saga and the command is not signed with the deployment's command key")

// SignedIDs says which command ids only holders of a key may use: the
// ids starting with one of Prefixes (a saga's "<name>.": see
// sagas.CommandID) must come with a SignCommand signature under Key.
type SignedIDs struct {
	// Key is the deployment's command key (at least 32 bytes); empty: no
	// id is reserved.
	Key []byte
	// Prefixes start the reserved ids.
	Prefixes []string
}

// MinKeyLength is the shortest command key SignedIDs and sagas accept.
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

// SignCommand returns cmd's signature under key: HMAC-SHA256 over its id,
// type and aggregate, hex-encoded.
func SignCommand(key []byte, cmd Command) string {
	mac := hmac.New(sha256.New, key)
	for _, part := range []string{cmd.ID, cmd.Type, cmd.AggregateType, cmd.AggregateID} {
		mac.Write([]byte(part))
		mac.Write([]byte{0})
	}
	return hex.EncodeToString(mac.Sum(nil))
}

// VerifyCommand reports whether signature is cmd's under key (in
// constant time).
func VerifyCommand(key []byte, cmd Command, signature string) bool {
	got, err := hex.DecodeString(signature)
	if err != nil || len(key) == 0 {
		return false
	}
	want, _ := hex.DecodeString(SignCommand(key, cmd))
	return hmac.Equal(got, want)
}
