// Package privacy keeps personal data forgettable: crypto-shredding with
// a data key per data subject.
//
// Each subject (an account holder, a todo's owner, an analytics user) has
// one 256-bit data key, made on first use by a KMS (AWS KMS, or the
// stack's local one) and stored only wrapped by the KMS key, in a
// DynamoDB table of its own (KeyStore). Personal values are sealed with
// their subject's key (AES-256-GCM, bound to the subject and to what the
// caller names: the event's identity and the field), and opened with it.
// Forgetting a subject deletes its wrapped key and leaves a tombstone:
// every sealed copy of its values, wherever it travelled (events,
// snapshots, topics, backups), can no longer be opened, and no new key is
// made for it. Keys are cached in each process for at most
// KeyStoreConfig.CacheTTL, which bounds how long a process that has not
// heard of a forgetting can still open the subject's values.
package privacy
