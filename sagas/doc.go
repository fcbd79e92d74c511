// Package sagas runs process managers on the bus: a saga reacts to events,
// outbound events, the answers to the commands it sent and its own
// timeouts, keeps each instance's state in Postgres, and sends commands.
//
// A Saga is pure: Handle gets an instance's state and one Input and
// returns the next state, recording what to do in Effects (send a
// command, cancel one, set or clear a timeout, finish). The Runner makes
// that exactly once in effect:
//
//   - each input is handled in one Postgres transaction that records the
//     input's id (a redelivery finds it and is skipped), locks and writes
//     the instance's state, stores its timeouts and queues its effects in
//     an outbox; the effects run after the commit, and an outbox row left
//     by a crash is run again by the next sweep;
//   - a command's id is derived from what caused it, <saga>.<instance>.<step>,
//     so sending it twice is harmless: the command handlers answer a
//     repeated command id with the answer recorded the first time, and
//     append nothing twice;
//   - the answers come back on the saga's own replies topic
//     (ReplyTopic: <prefix>commands.replies.saga.<name>, which each
//     command names in its reply_to metadata), where the command id
//     names the instance and the step; a saga never reads the answers
//     to other senders' commands;
//   - timeouts are rows with a due time, polled, so they survive restarts;
//   - cancelling a step's command records a refusal under its id on its
//     aggregate (commands.OutcomeRecorder) unless an answer is recorded
//     already: whichever comes first wins, so a command that was not
//     handled yet never will be, and the saga gets the winning answer as
//     the step's result either way.
//
// The tables are created by eventpipe's Postgres migrations (006).
package sagas
