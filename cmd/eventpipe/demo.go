package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/dev/demo"
)

func demoCommand() *cobra.Command {
	var cfg demo.Config
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Bring the stack up, run the pipeline and narrate a burst of commands through it",
		Long: `demo brings the local stack up, creates the tables, starts 'serve', 'relay' and
'consume --all' as child processes, sends bank-account, order and todo commands
(some refused by the rules), and shows what was accepted and appended, the
consumers' lag falling to zero, and what each read model then holds, checked
against what the commands imply. Its analytics chapter posts a generated
browsing burst and shows the sessions and hourly counts the aggregation
consumer makes of it, and the hourly order roll-up. Then it stays up with URLs to try until Ctrl-C;
--once exits after the story.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := newStack(cmd)
			if err != nil {
				return err
			}
			if err := s.Up(cmd.Context()); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintln(out)
			if err := printStatus(cmd, s); err != nil {
				return err
			}
			cfg.Endpoints = eventpipe.EndpointsFromEnv()
			cfg.Out = out
			if cfg.LogDir == "" {
				cfg.LogDir = filepath.Join(s.Dir(), "logs")
			}
			return demo.Run(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&cfg.Once, "once", false, "exit after the story instead of waiting for Ctrl-C")
	f.StringVar(&cfg.RelayMetricsAddr, "relay-metrics-addr", "127.0.0.1:9464", "where the relay serves /metrics")
	f.StringVar(&cfg.ConsumeMetricsAddr, "consume-metrics-addr", "127.0.0.1:9465", "where the consumers serve /metrics")
	f.StringVar(&cfg.LogDir, "log-dir", "", "where the children's logs go (default: the stack's log folder)")
	return cmd
}
