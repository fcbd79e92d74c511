package statuspage

import "time"

// OperatorAction is one recorded operator action (a poison redrive, a
// parked reapply or skip, …; see package operator's OperatorActions).
type OperatorAction struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	Reason string    `json:"reason,omitempty"`
	Result string    `json:"result"`
	// State is "started" until the action recorded its result, then
	// "done".
	State string `json:"state,omitempty"`
}
