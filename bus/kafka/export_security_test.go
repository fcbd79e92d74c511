package kafka

import "context"

// SetMSKSigner makes AWS_MSK_IAM tokens come from sign instead of
// aws-msk-iam-sasl-signer-go until restore is called. Tests that use it
// must not run in parallel with other MSK IAM tests.
func SetMSKSigner(sign func(ctx context.Context, s SASL) (token string, expiryMs int64, err error)) (restore func()) {
	old := mskSign
	mskSign = sign
	return func() { mskSign = old }
}
