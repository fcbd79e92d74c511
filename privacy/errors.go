package privacy

import (
	"errors"
	"fmt"

	"github.com/eventpipe/eventpipe/eventstore"
)

// CodeForgotten is the code of a command refused because the data
// subject of its aggregate was forgotten (commands.Result.Code).
const CodeForgotten eventstore.Code = "privacy.forgotten"

// ErrForgotten is matched (errors.Is) by every *ForgottenError.
var ErrForgotten = errors.New("subject forgotten")

// ForgottenError says a subject was forgotten: its keys are gone, so its
// sealed values cannot be opened and nothing new can be sealed for it.
// Subject is empty when only the scope is known (an append's check
// that its keys still exist failed).
// It is permanent: asking again gives the same answer.
type ForgottenError struct {
	Subject, Scope string
}

func (e *ForgottenError) Error() string {
	switch {
	case e.Subject == "":
		return fmt.Sprintf("%v: the data of %s has no key (its subject was forgotten)", ErrForgotten, e.Scope)
	case e.Scope == "":
		return fmt.Sprintf("%v: %s (its personal data was erased and cannot be written again)", ErrForgotten, e.Subject)
	}
	return fmt.Sprintf("%v: %s, whose data %s holds (its personal data was erased and cannot be written again)", ErrForgotten, e.Subject, e.Scope)
}

// Is makes errors.Is(err, ErrForgotten) true.
func (e *ForgottenError) Is(target error) bool { return target == ErrForgotten }

// Permanent marks it permanent for eventstore.IsPermanent.
func (e *ForgottenError) Permanent() bool { return true }

// KeyError says the KMS refused or failed to make or unwrap a scope's
// data key: a wrong, disabled, deleted or unreachable KMS key, or a
// wrapped key that is not the scope's; or (Op "find") that the keys
// table has no key of a scope whose sealed value is being opened. Nothing was written. It is not
// permanent: a key re-enabled or a KMS back makes the same call work, so
// consumers retry (and their lag shows it) rather than drop data.
type KeyError struct {
	Scope string
	Op    string // "generate" or "decrypt"
	KeyID string
	Err   error
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("privacy: kms %s of the data key of %s with KMS key %s: %v", e.Op, e.Scope, e.KeyID, e.Err)
}

func (e *KeyError) Unwrap() error { return e.Err }
