package privacy

import (
	"errors"
	"fmt"
)

// ErrForgotten is matched (errors.Is) by every *ForgottenError.
var ErrForgotten = errors.New("subject forgotten")

// ForgottenError says a subject was forgotten: its key is gone, so its
// sealed values cannot be opened and nothing new can be sealed for it.
// It is permanent: asking again gives the same answer.
type ForgottenError struct {
	Subject string
}

func (e *ForgottenError) Error() string {
	return fmt.Sprintf("%v: %s (its personal data was erased and cannot be written again)", ErrForgotten, e.Subject)
}

// Is makes errors.Is(err, ErrForgotten) true.
func (e *ForgottenError) Is(target error) bool { return target == ErrForgotten }

// Permanent marks it permanent for eventstore.IsPermanent.
func (e *ForgottenError) Permanent() bool { return true }

// KeyError says the KMS refused or failed to make or unwrap a subject's
// data key: a wrong, disabled, deleted or unreachable KMS key, or a
// wrapped key that is not the subject's. Nothing was written. It is not
// permanent: a key re-enabled or a KMS back makes the same call work, so
// consumers retry (and their lag shows it) rather than drop data.
type KeyError struct {
	Subject string
	Op      string // "generate" or "decrypt"
	KeyID   string
	Err     error
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("privacy: kms %s of the data key of %s with KMS key %s: %v", e.Op, e.Subject, e.KeyID, e.Err)
}

func (e *KeyError) Unwrap() error { return e.Err }
