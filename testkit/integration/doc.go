// Package integration is for the integration tests of a module built on
// eventpipe: tests that run a read model, a consumer or the whole
// pipeline against the local stack (`eventpipe stack up`: DynamoDB
// Local, Kafka, PostgreSQL, the Elasticsearch-API server). It is not
// meant for production code; the given/when/then fixtures of package
// testkit need no service at all.
//
//   - Stack checks that every service answers at the addresses of the
//     environment (eventpipe.EndpointsFromEnv) and fails the test at
//     once, saying how to start the stack, when one does not: an
//     integration test never skips silently. DynamoDB, KafkaBrokers,
//     Postgres and Elasticsearch check one service and return a client.
//   - Under `go test -short` (a unit tier that runs without services)
//     each of them skips its test instead, saying it is an integration
//     test (Mark).
//   - UniqueName, PostgresSchema and Isolate keep tests that share one
//     stack apart: their own tables, topics, consumer groups and Postgres
//     schema, removed when the test ends.
//   - StartChild runs the test binary again as a child process (a main
//     of the test's own, chosen by RunChild in TestMain) or a program of
//     the module, so that a test can kill it with SIGKILL, restart it and
//     wait for it; KillRepeatedly kills a child at random moments while
//     it works.
//   - Await and AwaitProgress wait for something to happen without a
//     wall-clock deadline that a slow, loaded machine could hit: they
//     fail the test only when nothing moved for HangAfter (3 minutes,
//     or EVENTPIPE_TEST_HANG_AFTER), saying how far things got.
//
// The endpoints it returns are eventpipe.Endpoints: eventpipe's
// Endpoints type is an alias of the internal type these signatures name
// (this package does not import package eventpipe, so that eventpipe's
// own packages can test with it), and they come from the environment as
// eventpipe.EndpointsFromEnv reads it.
package integration
