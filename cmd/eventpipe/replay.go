package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/operator"
	"github.com/eventpipe/eventpipe/projections"
)

func replayCommand() *cobra.Command {
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "replay <projection>",
		Short: "Rebuild a read model from the event store (shadow tables, or a new Elasticsearch index) and swap it in atomically",
		Long: `replay rebuilds one projection's read model from the event store: it applies the
whole history to shadow tables in a schema of their own (<schema>_replay_<name>,
beside the live schema, which the search_path parameter of EVENTPIPE_POSTGRES_URL
names, default public) while readers and any running 'eventpipe consume' keep
using the live tables, then, in one transaction, brings the shadow tables up to
the live positions, moves them in place of the live ones and replaces the
projection's positions. Readers see the old model until that commit and the new
one after it; a running consumer pauses for the swap and goes on from the new
positions.

A search model (Elasticsearch: todos-search, orders-search) is rebuilt into a new
index (<alias>-<unix ms>, with the live index's number of replicas) while
searches and the live consumer use the alias's index; the new index is brought
up to the live one, refreshed, and the alias is moved to it in one _aliases
request, so a search sees the old index or the new one, never an empty or
half-built one. The old index is then write-blocked (a late live write fails,
is retried through the alias), caught up once more and deleted.

Progress goes to stderr: a bar (events done/total, rate, ETA) on a terminal,
a plain line every --progress-interval otherwise.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			progress := newReplayProgress(cmd.ErrOrStderr(), args[0], interval)
			res, err := operator.Replay(ctx, operator.ReplayConfig{
				Process: eventpipe.Process{Catalog: catalog, Endpoints: eventpipe.EndpointsFromEnv()}, ReadModel: args[0], Progress: progress.update,
			})
			progress.finish()
			if errors.Is(err, operator.ErrReplayRunning) {
				return fmt.Errorf("replay: %s: another replay of it is running; wait for it to finish", args[0])
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "replayed %s: %d events from the store, %d more applied at the swap; swap took %s, whole replay %s\n",
				args[0], res.Events, res.CaughtUp, res.Swap.Round(time.Millisecond), res.Elapsed.Round(time.Millisecond))
			return nil
		},
	}
	cmd.Flags().DurationVar(&interval, "progress-interval", 2*time.Second, "how often to print a progress line when stderr is not a terminal")
	return cmd
}

// replayProgress shows a replay's progress: a bar on a terminal, plain
// lines at most every interval otherwise.
type replayProgress struct {
	w        io.Writer
	name     string
	interval time.Duration
	bar      *progressbar.ProgressBar // nil when w is not a terminal
	last     time.Time
	phase    string
}

func newReplayProgress(w io.Writer, name string, interval time.Duration) *replayProgress {
	r := &replayProgress{w: w, name: name, interval: interval}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		r.bar = progressbar.NewOptions(-1, progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("replay "+name),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("events"),
			progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSetWidth(30))
	}
	return r
}

func (r *replayProgress) update(p projections.ReplayProgress) {
	if r.bar != nil {
		if p.Total > 0 && r.bar.GetMax() != p.Total {
			r.bar.ChangeMax(max(p.Total, p.Done))
		}
		if p.Phase != r.phase {
			r.bar.Describe(fmt.Sprintf("replay %s (%s)", r.name, p.Phase))
		}
		r.phase = p.Phase
		_ = r.bar.Set(p.Done)
		return
	}
	if p.Phase == r.phase && time.Since(r.last) < r.interval {
		return
	}
	r.phase, r.last = p.Phase, time.Now()
	fmt.Fprintln(r.w, progressLine(r.name, p))
}

func (r *replayProgress) finish() {
	if r.bar != nil {
		_ = r.bar.Finish()
		fmt.Fprintln(r.w)
	}
}

// progressLine is a plain progress line: phase, events done of total,
// rate and, while rebuilding with a known total, the time left.
func progressLine(name string, p projections.ReplayProgress) string {
	var b strings.Builder
	fmt.Fprintf(&b, "replay %s: %s: %d", name, p.Phase, p.Done)
	if p.Total > 0 {
		fmt.Fprintf(&b, "/%d events (%d%%)", p.Total, min(100, p.Done*100/p.Total))
	} else {
		b.WriteString(" events")
	}
	secs := p.Elapsed.Seconds()
	if secs > 0 && p.Done > 0 {
		rate := float64(p.Done) / secs
		fmt.Fprintf(&b, ", %.0f events/s", rate)
		if p.Phase == "rebuild" && p.Total > p.Done {
			eta := time.Duration(float64(p.Total-p.Done) / rate * float64(time.Second))
			fmt.Fprintf(&b, ", ETA %s", eta.Round(time.Second))
		}
	}
	fmt.Fprintf(&b, ", elapsed %s", p.Elapsed.Round(time.Second))
	return b.String()
}
