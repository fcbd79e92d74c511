package eventpipe

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/elastic/go-elasticsearch/v8/esapi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/eventpipe/eventpipe/buildinfo"
	"github.com/eventpipe/eventpipe/bus/kafka"
	"github.com/eventpipe/eventpipe/health"
	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/projections/elastic/esclient"
)

// NewMetricsRegistry returns a Prometheus registry with the Go runtime and
// process collectors and eventpipe_build_info (the running build, package
// buildinfo), for a process's metrics.
func NewMetricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfoGauge(buildinfo.Read()))
	return reg
}

// buildInfoGauge is eventpipe_build_info{version,commit,goversion} 1, the
// usual way to join a process's series with the build it runs.
func buildInfoGauge(info buildinfo.Info) prometheus.Collector {
	commit := info.Commit
	if info.Modified {
		commit += "+modified"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "eventpipe_build_info", Help: "The running build: 1, labelled with its version, VCS commit (+modified for a changed tree) and Go version.",
		ConstLabels: prometheus.Labels{"version": info.Version, "commit": commit, "goversion": info.GoVersion}})
	g.Set(1)
	return g
}

// ServeMetrics serves reg on addr (/metrics and /healthz) until ctx ends,
// within httpapi's connection limits as the EVENTPIPE_HTTP_* variables
// set them (httpapi.LimitsFromEnv; the defaults when unset).
func ServeMetrics(ctx context.Context, addr string, reg *prometheus.Registry) error {
	return ServeProbes(ctx, addr, reg, nil)
}

// ServeProbes is ServeMetrics with probes' /livez, /readyz and /startupz
// beside /metrics and /healthz (none when probes is nil): the listener
// of `relay --metrics-addr` and `consume --metrics-addr`. Run it on a
// context that outlives the process's drain, so that /readyz answers
// 503 while the process stops.
func ServeProbes(ctx context.Context, addr string, reg *prometheus.Registry, probes *health.Probes) error {
	limits, err := httpapi.LimitsFromEnv(os.LookupEnv)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	srv, err := httpapi.New(httpapi.Config{Addr: addr, Registry: reg, Limits: limits})
	if err != nil {
		return err
	}
	if probes != nil {
		probes.Mount(srv.Mux)
	}
	return srv.Run(ctx, nil)
}

// The names of the checks the processes add to their probes.
const (
	CheckDynamoDB = "dynamodb"       // the table answers DescribeTable and is ACTIVE
	CheckKafka    = "kafka-groups"   // every consumer group of the process is Stable with members
	CheckPostgres = "postgres"       // the read-model database answers a ping
	CheckSearch   = "elasticsearch"  // the search cluster's health answers, not red
	CheckLoop     = "loop"           // a relay's discovery loop turns
	CheckLeases   = "relay-leases"   // a relay balanced its leases lately
	CheckRunning  = "running"        // the process's consumers or handlers run
	CheckCommands = "command-router" // serve's command router runs
)

// tableCheck fails unless table answers DescribeTable as ACTIVE (or
// UPDATING: a table being changed still serves).
func tableCheck(db *dynamodb.Client, table string) health.Check {
	return func(ctx context.Context) error {
		out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			return fmt.Errorf("describe table %s: %w", table, err)
		}
		if s := out.Table.TableStatus; s != "ACTIVE" && s != "UPDATING" {
			return fmt.Errorf("table %s is %s", table, s)
		}
		return nil
	}
}

// searchCheck fails unless the search cluster answers its health API
// with a status other than red (red: a primary shard is unassigned, so
// some writes and searches fail).
func searchCheck(es *esclient.Client) health.Check {
	return func(ctx context.Context) error {
		var h struct {
			Status string `json:"status"`
		}
		if err := esclient.Do(ctx, es, esapi.ClusterHealthRequest{}, &h); err != nil {
			return fmt.Errorf("elasticsearch cluster health: %w", err)
		}
		if h.Status == "red" {
			return errors.New("elasticsearch cluster health is red")
		}
		return nil
	}
}

// readyGroup is a consumer group a readiness check waits for, and the
// topic prefix it subscribes to when it reads every topic of a prefix
// (ConsumerInfo.TopicPrefix).
type readyGroup struct {
	group, topicPrefix string
}

// groupsCheck fails unless each of groups is Stable with at least one
// member, as its coordinator describes it: the brokers answer and the
// group has formed. Kafka does not say which process a dynamic member
// is, so it is the group's state, not this process's membership alone,
// that a pass proves; a rebalance (a member joining or leaving) fails it
// until the group settles. A group that reads every topic of a prefix
// cannot form while no such topic exists (before the first analytics
// event of a new deployment): it passes then, the brokers having
// answered the topic listing.
func groupsCheck(reader *kafka.OffsetReader, groups []readyGroup) health.Check {
	return func(ctx context.Context) error {
		var errs []error
		for _, g := range groups {
			d, err := reader.DescribeGroup(ctx, g.group)
			switch {
			case err != nil:
				errs = append(errs, err)
			case d.State != "Stable" || len(d.Members) == 0:
				if g.topicPrefix != "" {
					topics, err := reader.TopicsWithPrefix(ctx, g.topicPrefix)
					if err != nil {
						errs = append(errs, err)
						continue
					}
					if len(topics) == 0 {
						continue // nothing to read yet, so no group to join
					}
				}
				errs = append(errs, fmt.Errorf("group %s is %s with %d members", g.group, d.State, len(d.Members)))
			}
		}
		return errors.Join(errs...)
	}
}

// AddRelayChecks adds the checks of relays rs, run in one process, to p:
// live while each one's discovery loop turns (a pass ended within
// LeaseDuration), ready while each one balanced its leases lately (its
// last pass without an error ended within LeaseDuration: DynamoDB and
// its stream answered, and it took its share of the shards, which is
// none when other workers hold them all) and is not stopping.
func AddRelayChecks(p *health.Probes, rs []*Relay) {
	p.AddLive(CheckLoop, func(context.Context) error {
		var errs []error
		for _, r := range rs {
			h := r.Health()
			if !h.LastPass.IsZero() && time.Since(h.LastPass) > h.LeaseDuration+h.DiscoveryInterval {
				errs = append(errs, fmt.Errorf("relay %s: no discovery pass for %v", r.StreamName(), time.Since(h.LastPass).Round(time.Millisecond)))
			}
		}
		return errors.Join(errs...)
	})
	p.AddReady(CheckLeases, func(context.Context) error {
		var errs []error
		for _, r := range rs {
			h := r.Health()
			switch {
			case h.Stopping:
				errs = append(errs, fmt.Errorf("relay %s is stopping", r.StreamName()))
			case h.LastBalanced.IsZero():
				errs = append(errs, fmt.Errorf("relay %s has not balanced its leases yet", r.StreamName()))
			case time.Since(h.LastBalanced) > h.LeaseDuration:
				errs = append(errs, fmt.Errorf("relay %s last balanced its leases %v ago", r.StreamName(), time.Since(h.LastBalanced).Round(time.Millisecond)))
			}
		}
		return errors.Join(errs...)
	})
}

// RelaysStarted reports whether each of rs has balanced its leases once:
// the relay process's startup.
func RelaysStarted(rs []*Relay) bool {
	for _, r := range rs {
		if r.Health().LastBalanced.IsZero() {
			return false
		}
	}
	return true
}
