// Package eventpipe is the composition root of eventpipe: the Catalog of
// what a deployment knows (its domains, its read models and the upcasters
// of stored events), built without any I/O, and the constructors that open
// the parts of the pipeline from it. The eventpipe binary is built on it,
// and so is a user's own module: register your domains and read models on
// a Catalog (start from Builtin or NewCatalog) and hand it to the same
// constructors.
package eventpipe
