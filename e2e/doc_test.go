// Package e2e_test holds the end-to-end tests: whole processes (serve,
// relay, consume, sagas) over the real stack, killed and restarted, and
// the end-to-end benchmarks. Its test binary doubles as their child
// processes: TestMain (writeside_main_test.go) turns it into a serve, saga,
// analytics, HTTP API or Kafka broker child when a test re-executes it
// (os.Args[0]) with the child's environment. The rigs it shares with the
// root's and the operator's tests live in dev/rigs and dev/testenv. Like
// every integration test, they need the local stack (`eventpipe stack up`)
// and fail, never skip, when a service is missing; under -short (`make
// test-unit`) each skips, saying so.
//
// The composition root's own tests, which start no process, stay in the
// root package (catalog_test.go, example_test.go, layout_test.go, ...).
package e2e_test
