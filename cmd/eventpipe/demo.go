package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/dev/demo"
	"github.com/eventpipe/eventpipe/dev/stack"
	"github.com/eventpipe/eventpipe/httpapi/auth/mint"
)

// demoSubject is demo's --subject.
var demoSubject string

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
--once exits after the story.

demo uses the stack in the mode it is in. On a secured stack ("eventpipe stack
up --secure") it tells the same story over TLS and credentials with the HTTP
API's JWT auth on: serve verifies tokens of the stack's key set against its
policy, and the demo sends a token for --subject with each request.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The stack in the mode it is in: a secured stack stays
			// secured, and the story runs over TLS and SASL with the
			// HTTP API's auth on.
			s, err := stack.New(stack.Config{Out: cmd.OutOrStdout(), KeepMode: true})
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
			if s.Secure() {
				if err := secureDemo(cmd, s, &cfg); err != nil {
					return err
				}
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
	f.StringVar(&demoSubject, "subject", stack.LocalAuthSubjects[0], "on a secured stack, the subject the demo's token names")
	f.BoolVar(&cfg.Once, "once", false, "exit after the story instead of waiting for Ctrl-C")
	f.StringVar(&cfg.RelayMetricsAddr, "relay-metrics-addr", "127.0.0.1:9464", "where the relay serves /metrics")
	f.StringVar(&cfg.ConsumeMetricsAddr, "consume-metrics-addr", "127.0.0.1:9465", "where the consumers serve /metrics")
	f.StringVar(&cfg.LogDir, "log-dir", "", "where the children's logs go (default: the stack's log folder)")
	return cmd
}

// secureDemo points the demo and its children at the secured stack s:
// its variables (those of `eventpipe stack env`) go into this process's
// environment, whether or not the shell evaluated them, and the demo gets
// a token of the stack's key set for demoSubject.
func secureDemo(cmd *cobra.Command, s *stack.Stack, cfg *demo.Config) error {
	kv, err := stack.SecureExports(s.Dir(), s.Endpoints())
	if err != nil {
		return err
	}
	for _, p := range kv {
		if err := os.Setenv(p[0], p[1]); err != nil {
			return err
		}
	}
	icfg, err := localIssuerConfig("")
	if err != nil {
		return err
	}
	iss, err := mint.New(icfg)
	if err != nil {
		return err
	}
	tok, err := iss.Token(cmd.Context(), demoSubject, mint.TokenOptions{})
	if err != nil {
		return err
	}
	cfg.AuthToken, cfg.AuthSubject = tok, demoSubject
	return nil
}
