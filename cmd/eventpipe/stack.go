package main

import (
	"fmt"
	"path/filepath"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe/dev/esserver"
	"github.com/eventpipe/eventpipe/dev/kafkabroker"
	"github.com/eventpipe/eventpipe/dev/kmsserver"
	"github.com/eventpipe/eventpipe/dev/stack"
)

func stackCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stack",
		Short: "Fetch, start, check and stop the local services (DynamoDB Local, Kafka, PostgreSQL, Elasticsearch API, KMS)",
		Long: `The local stack runs each service as a process on 127.0.0.1, cached and persisted
under .stack/ at the repository root (EVENTPIPE_STACK_DIR moves it). Ports follow
the endpoint variables (EVENTPIPE_DYNAMODB_ENDPOINT, EVENTPIPE_KAFKA_BROKERS,
EVENTPIPE_POSTGRES_URL, ELASTICSEARCH_URL, EVENTPIPE_KMS_ENDPOINT); a
non-loopback endpoint is treated as external and left alone. Elasticsearch is
served by eventpipe's own Elasticsearch-API server (a subset of the
Elasticsearch 8 REST API; not Elasticsearch): point ELASTICSEARCH_URL at a real
Elasticsearch 8 to use that. KMS is served by Local KMS's key store and
operations (github.com/nsmithuk/local-kms) behind eventpipe's own loopback
server; at start the stack creates the key alias/eventpipe-subjects.`,
	}
	var secure bool
	up := &cobra.Command{
		Use:   "up",
		Short: "Start every service that is not already running (idempotent)",
		Long: `Start every service that is not already running (idempotent).

With --secure the services take the shapes of production: Kafka with TLS and
SASL SCRAM-SHA-512, PostgreSQL with TLS and scram-sha-256 passwords only, the
Elasticsearch API over HTTPS with an API key, and a key set and a policy for
the HTTP API's JWT auth ("eventpipe auth token <subject>" prints a token serve
accepts). Certificates, passwords and keys are generated once under <stack
dir>/secure/ (readable by you only); "eventpipe stack env" prints the variables
that point clients and serve at them. The mode is remembered: stop the stack
before switching modes (data is kept); "eventpipe demo" runs in the stack's
mode.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := stack.New(stack.Config{Out: cmd.OutOrStdout(), Secure: secure})
			if err != nil {
				return err
			}
			return s.Up(cmd.Context())
		},
	}
	up.Flags().BoolVar(&secure, "secure", false, "start with TLS and credentials everywhere (material in <stack dir>/secure/)")
	cmd.AddCommand(
		up,
		&cobra.Command{
			Use:   "down",
			Short: "Stop the processes this stack started; data is kept",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				s, err := newStack(cmd)
				if err != nil {
					return err
				}
				return s.Down(cmd.Context())
			},
		},
		&cobra.Command{
			Use:   "status",
			Short: "Show each service, its address, PID and a live health check",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				s, err := newStack(cmd)
				if err != nil {
					return err
				}
				return printStatus(cmd, s)
			},
		},
		&cobra.Command{
			Use:   "env",
			Short: "Print export lines for the stack's addresses (eval \"$(eventpipe stack env)\"); in secure mode also its CA, password and key files",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				s, err := newStack(cmd)
				if err != nil {
					return err
				}
				lines, err := s.EnvLines()
				if err != nil {
					return err
				}
				for _, line := range lines {
					fmt.Fprintln(cmd.OutOrStdout(), line)
				}
				return nil
			},
		},
		kafkaBrokerCommand(),
		esServerCommand(),
		kmsServerCommand(),
	)
	return cmd
}

// newStack builds the stack from the environment, printing to cmd's
// output; it follows the mode the last `stack up` recorded.
func newStack(cmd *cobra.Command) (*stack.Stack, error) {
	return stack.New(stack.Config{Out: cmd.OutOrStdout()})
}

func printStatus(cmd *cobra.Command, s *stack.Stack) error {
	mode := s.Mode()
	if s.Secure() {
		mode += " (TLS and credentials; material in " + filepath.Join(s.Dir(), "secure") + ", see `eventpipe stack env`)"
	}
	fmt.Fprintf(cmd.OutOrStdout(), "MODE %s\n", mode)
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "COMPONENT\tADDRESS\tPROCESS\tHEALTH\tLOG")
	unhealthy := 0
	for _, st := range s.Status(cmd.Context()) {
		proc := "-"
		switch {
		case st.PID != 0:
			proc = fmt.Sprintf("pid %d", st.PID)
		case !st.Managed:
			proc = "external"
		}
		health := "healthy"
		switch {
		case st.Healthy:
		default:
			health = "down: " + st.Detail
			unhealthy++
		}
		log := st.LogFile
		if log == "" {
			log = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", st.Name, st.Address, proc, health, log)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if unhealthy > 0 {
		return fmt.Errorf("%d component(s) down", unhealthy)
	}
	return nil
}

func kafkaBrokerCommand() *cobra.Command {
	var cfg kafkabroker.Config
	cmd := &cobra.Command{
		Use:   "kafka-broker",
		Short: "Run the stack's Kafka-protocol broker in the foreground (franz-go kfake, persisted)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return kafkabroker.Run(cmd.Context(), cfg)
		},
	}
	cfg.BindFlags(cmd.Flags())
	_ = cmd.MarkFlagRequired("data-dir")
	return cmd
}

func esServerCommand() *cobra.Command {
	var cfg esserver.Config
	cmd := &cobra.Command{
		Use:   "es-server",
		Short: "Run the stack's Elasticsearch-API server in the foreground (a subset of the Elasticsearch 8 REST API, persisted; not Elasticsearch)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return esserver.Run(cmd.Context(), cfg)
		},
	}
	cfg.BindFlags(cmd.Flags())
	_ = cmd.MarkFlagRequired("data-dir")
	return cmd
}

func kmsServerCommand() *cobra.Command {
	var cfg kmsserver.Config
	cmd := &cobra.Command{
		Use:   "kms-server",
		Short: "Run the stack's KMS in the foreground (Local KMS's key store and operations on loopback, persisted)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return kmsserver.Run(cmd.Context(), cfg)
		},
	}
	cfg.BindFlags(cmd.Flags())
	_ = cmd.MarkFlagRequired("data-dir")
	return cmd
}
