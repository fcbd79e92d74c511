package operator

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/bus"
	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/statuspage"
)

var _ eventpipe.OperatorRoutes = MountStatusPage

// MountStatusPage mounts a status page (package statuspage: GET /status
// and /status.json, sampling from the first request until it is closed)
// on srv: StatusPageReader on w's catalogue, endpoints, command handlers'
// group and read-model database, and who may reach the API and the
// operator surface (w's authentication and policy, and where the operator
// surface is served). It is an eventpipe.OperatorRoutes: `eventpipe serve`
// sets it as WriteSideConfig.OperatorRoutes, so that the write side
// mounts the page on the API's listener, behind its authentication, or
// on the operator listener (WriteSideConfig.OperatorAddr), and closes it
// with the server.
func MountStatusPage(srv *httpapi.Server, w *eventpipe.WriteSide) (io.Closer, error) {
	cfg := w.Config()
	page, err := statuspage.New(statuspage.Config{Reader: StatusPageReader(StatusConfig{Process: eventpipe.Process{Catalog: cfg.Catalog, Endpoints: cfg.Endpoints},
		CommandGroup: cfg.ConsumerGroup, DB: w.ReadModels()}), Access: access(cfg), Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("status page: %w", err)
	}
	page.Mount(srv.Mux)
	return page, nil
}

// busCommands says how the command handlers verify commands from the
// bus: whether a signature is required, and with which producer keys.
func busCommands(cfg eventpipe.WriteSideConfig) string {
	ids := slices.Sorted(maps.Keys(cfg.ProducerKeys))
	keys := "no producer keys"
	if len(ids) > 0 {
		keys = "producer keys: " + strings.Join(ids, ", ")
	}
	if cfg.RequireSignedCommands {
		return "signatures required, unsigned commands refused (" + keys + ")"
	}
	return "unsigned commands accepted, their actors recorded as claimed (" + keys + ")"
}

// access says who may reach the write side's HTTP API and its operator
// surface, for the status page.
func access(cfg eventpipe.WriteSideConfig) statuspage.Access {
	a := statuspage.Access{Mode: statuspage.AccessOpen, Operator: "on the API's listener, open like the API", BusCommands: busCommands(cfg)}
	if cfg.OperatorAddr != "" {
		a.Operator = "on their own listener " + cfg.OperatorAddr + ": " + string(cfg.OperatorAccess())
	}
	if cfg.Auth == nil {
		return a
	}
	a.Mode, a.Issuer, a.Audience = statuspage.AccessJWT, cfg.Auth.Issuer, cfg.Auth.Audience
	for _, r := range cfg.Auth.Policy.Rules {
		a.Rules = append(a.Rules, statuspage.AccessRule(r))
	}
	if cfg.OperatorAddr == "" {
		a.Operator = "on the API's listener, behind its authentication (read grants status and metrics; subjects: read exports, write forgets)"
	}
	return a
}

// StatusPageReader returns the status page's reader (package statuspage)
// on cfg: each reading is Status(cfg) and, for the rates, the newest
// offset of every aggregate type's events topic, read in the same pass
// with the same Kafka client. It is safe for concurrent use.
func StatusPageReader(cfg StatusConfig) statuspage.ReaderFunc {
	_ = cfg.setDefaults() // Status reports Endpoints.Err
	topics := bus.Topics{Prefix: cfg.Endpoints.TopicPrefix}
	var names []string
	for _, t := range cfg.Catalog.AggregateTypes() {
		names = append(names, topics.Events(t))
	}
	return func(ctx context.Context) statuspage.Snapshot {
		r, newest, eventsErr := readStatus(ctx, cfg, names)
		snap := statuspage.Snapshot{Took: r.Took}
		for _, rel := range r.Relays {
			sr := statuspage.Relay{Name: rel.Name, Stream: rel.Stream, PoisonTopic: rel.PoisonTopic, Poisoned: rel.Poisoned}
			if rel.Err != nil {
				sr.Err = rel.Err.Error()
			}
			for _, l := range rel.Leases {
				sr.Leases = append(sr.Leases, statuspage.Lease{Shard: l.ShardID, Owner: l.Owner, Checkpoint: l.Checkpoint, Finished: l.Finished, UpdatedAt: l.UpdatedAt})
			}
			snap.Relays = append(snap.Relays, sr)
		}
		for _, g := range r.Groups {
			sg := statuspage.Group{Name: g.Group, Kind: statuspage.KindCommands, Topics: g.Topics, Committed: g.Committed, Newest: g.Newest,
				Lag: g.Lag, PoisonTopic: g.PoisonTopic, Poisoned: g.Poisoned, Build: g.BuildState(), DefinitionChanges: g.DefinitionChanges()}
			switch {
			case g.Projection != "":
				sg.Kind = statuspage.KindProjection
				if r.ParkedErr == nil {
					sg.Parked = &statuspage.Parked{Events: g.Parked.Events, Aggregates: g.Parked.Aggregates}
				}
			case g.Saga != "":
				sg.Kind = statuspage.KindSaga
			case g.Kind == eventpipe.KindAggregator:
				sg.Kind = statuspage.KindAggregator
			case g.Kind != "":
				sg.Kind = string(g.Kind) // a snapshotter, a handler, a user's own kind
			}
			snap.Groups = append(snap.Groups, sg)
		}
		for _, sr := range r.Sagas {
			sp := statuspage.Saga{Name: sr.Name, Running: sr.Summary.Running, Finished: sr.Summary.Outcomes, Timeouts: sr.Summary.Timeouts,
				Overdue: sr.Summary.Overdue, Effects: sr.Summary.Effects}
			if sr.Err != nil {
				sp.Err = sr.Err.Error()
			}
			snap.Sagas = append(snap.Sagas, sp)
		}
		for _, a := range r.OperatorActions { // operator actions (issue 27)
			snap.OperatorActions = append(snap.OperatorActions, statuspage.OperatorAction{ID: a.ID, At: a.At, Actor: a.Actor,
				Action: a.Action, Target: a.Target, Reason: a.Reason, Result: a.Result, State: a.State})
		}
		for _, err := range r.Errors {
			snap.Errors = append(snap.Errors, err.Error())
		}
		snap.Events = []statuspage.EventsTopic{}
		if eventsErr != nil {
			snap.Events, snap.Errors = nil, append(snap.Errors, fmt.Sprintf("events topics' offsets: %v", eventsErr))
			return snap
		}
		for _, t := range cfg.Catalog.AggregateTypes() {
			snap.Events = append(snap.Events, statuspage.EventsTopic{AggregateType: t, Topic: topics.Events(t), Newest: newest[topics.Events(t)]})
		}
		return snap
	}
}
