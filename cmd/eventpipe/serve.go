package main

import (
	"cmp"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/health"
	"github.com/eventpipe/eventpipe/httpapi"
	"github.com/eventpipe/eventpipe/httpapi/auth"
	"github.com/eventpipe/eventpipe/operator"
)

func serveCommand() *cobra.Command {
	var group, operatorAddr string
	var noAuth, operatorInsecure, requireSigned bool
	var retention time.Duration
	var httpLimits func() (httpapi.Limits, error)
	var drain *drainSettings
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the command handlers (one consumer group) and the HTTP API",
		Long: `serve consumes every commands topic, runs each command through its handler
against the DynamoDB event store and publishes the result on commands.replies.
It also serves the HTTP API (the todo, orders and analytics resources,
/healthz, and the probes /livez, /readyz and /startupz, open like
/healthz) on EVENTPIPE_HTTP_ADDR, and the operator surface (/metrics, the
status page /status and /status.json) on the same listener, behind its
authentication, or on its own with --operator-addr
(EVENTPIPE_OPERATOR_ADDR), so that the API's listener serves only the API.
The operator listener is open on a loopback address (127.0.0.1, ::1,
localhost); on any other address it needs the API's JWT with a read grant
of status (the status page) or metrics (/metrics), and with --no-auth serve
refuses to start unless --operator-insecure says the network is trusted.
serve says at start which it is, and serves the probes there too.

On SIGTERM or SIGINT serve drains: /readyz answers 503 at once, after
--drain-delay the listeners stop taking connections, the requests and
commands in flight are finished and their offsets committed, and serve
exits within --grace-period (see docs/operations.md, "Probes and
drains").

The API needs JWT bearer authentication, configured from the environment
only: EVENTPIPE_AUTH_ISSUER, EVENTPIPE_AUTH_AUDIENCE,
EVENTPIPE_AUTH_POLICY_FILE and EVENTPIPE_AUTH_JWKS_FILE or
EVENTPIPE_AUTH_JWKS_URL (https:// only; optional EVENTPIPE_AUTH_LEEWAY and
EVENTPIPE_AUTH_MAX_TOKEN_LIFETIME, default 24h); see
docs/security.md. Without it serve refuses to start, unless --no-auth (or
EVENTPIPE_AUTH=off) says the API is meant to be open: for local
development only, and serve says so loudly at start.

The command ids of the sagas (<saga>.<instance>.<step>) are reserved for
commands the sagas sign with the deployment's command key, when one is set:
EVENTPIPE_COMMAND_KEY_FILE (a file holding it) or EVENTPIPE_COMMAND_KEY, at
least 32 bytes, the same for serve and consume.

Commands on the bus may be signed with a producer key
(EVENTPIPE_COMMAND_PRODUCER_KEYS_FILE: one "<key id> <key>" a line): their
events record the actor as verified (actor_source "signed"), an unsigned
command's as claimed. --require-signed-commands
(EVENTPIPE_REQUIRE_SIGNED_COMMANDS=true) refuses unsigned commands: they
are answered invalid (commands.unsigned) and nothing is stored. A command
whose signature does not verify is refused either way
(commands.bad_signature).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("operator-addr") {
				operatorAddr = os.Getenv(envOperatorAddr)
			}
			authCfg, err := auth.ConfigFromEnv()
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("no-auth") {
				if noAuth, err = auth.OffFromEnv(); err != nil {
					return err
				}
			}
			if authCfg == nil && !noAuth {
				return fmt.Errorf("serve: the HTTP API has no authentication: configure JWT with %s, %s, %s and %s or %s (see docs/security.md), or pass --no-auth (%s=off) for local development",
					auth.EnvIssuer, auth.EnvAudience, auth.EnvPolicyFile, auth.EnvJWKSFile, auth.EnvJWKSURL, auth.EnvAuth)
			}
			key, err := eventpipe.CommandKeyFromEnv()
			if err != nil {
				return err
			}
			limits, err := httpLimits()
			if err != nil {
				return err
			}
			producerKeys, err := eventpipe.ProducerKeysFromEnv()
			if err != nil {
				return err
			}
			if !cmd.Flags().Changed("require-signed-commands") {
				if requireSigned, err = eventpipe.RequireSignedCommandsFromEnv(); err != nil {
					return err
				}
			}
			if err := drain.resolve(); err != nil {
				return fmt.Errorf("serve: %w", err)
			}
			probes, err := health.New(health.Config{Logger: slog.Default()})
			if err != nil {
				return err
			}
			// The status page is the operator surface's own route, on the
			// API's listener or on --operator-addr's (package operator).
			svc, err := eventpipe.NewWriteSide(cmd.Context(), eventpipe.WriteSideConfig{Process: eventpipe.Process{Catalog: catalog, Logger: slog.Default()}, ConsumerGroup: group,
				OperatorAddr: operatorAddr, OperatorInsecure: operatorInsecure, OperatorRoutes: operator.MountRoutes, Auth: authCfg, NoAuth: authCfg == nil && noAuth,
				CommandKey: key, CommandRetention: retention, HTTPLimits: limits, ProducerKeys: producerKeys, RequireSignedCommands: requireSigned,
				Probes: probes, ShutdownTimeout: drain.stopBudget()})
			if err != nil {
				return err
			}
			defer svc.Close()
			if authCfg == nil {
				slog.Warn("THE HTTP API IS UNAUTHENTICATED (--no-auth, for local development only): anyone who reaches " + svc.Endpoints().HTTPAddr + " can send every command and read everything. " +
					"Turn JWT auth on with " + auth.EnvIssuer + ", " + auth.EnvAudience + ", " + auth.EnvPolicyFile + " and " + auth.EnvJWKSFile + " or " + auth.EnvJWKSURL + " (see docs/security.md)")
			} else {
				slog.Info("HTTP API authentication on", "issuer", authCfg.Issuer, "audience", authCfg.Audience, "rules", len(authCfg.Policy.Rules))
			}
			if requireSigned {
				slog.Info("commands on the bus must be signed", "producer_keys", len(producerKeys), "deployment_key", len(key) > 0)
			} else {
				slog.Warn("unsigned commands on the bus are accepted: their actor is recorded as claimed (--require-signed-commands or " + eventpipe.EnvRequireSignedCommands + "=true refuses them)")
			}
			slog.Info("serving", "http", svc.Endpoints().HTTPAddr, "operator", cmp.Or(operatorAddr, svc.Endpoints().HTTPAddr), "operator_access", string(svc.Config().OperatorAccess()),
				"commands", svc.Dispatcher.Topics(), "group", group)
			// On SIGTERM: /readyz 503 at once; after --drain-delay the
			// listeners close, the requests in flight are answered and the
			// commands in flight finished, their offsets committed.
			return drain.run(cmd.Context(), probes, nil, svc.Run)
		},
	}
	addTracingFlag(cmd)
	httpLimits = addHTTPLimitFlags(cmd)
	cmd.Flags().StringVar(&group, "group", eventpipe.DefaultCommandGroup, "consumer group of the command handlers")
	cmd.Flags().BoolVar(&noAuth, "no-auth", false, "serve the HTTP API without authentication: local development only (default $"+auth.EnvAuth+"=off)")
	cmd.Flags().DurationVar(&retention, "command-retention", eventpipe.DefaultCommandRetention, "how long each command record and Idempotency-Key claim is kept (DynamoDB ttl): a command or request retried later runs again")
	cmd.Flags().StringVar(&operatorAddr, "operator-addr", "", "serve /metrics, /status and /status.json here instead of on the API's listener: open on loopback, elsewhere behind the API's JWT auth (read grants status, metrics) (default $"+envOperatorAddr+"; empty: the API's listener)")
	cmd.Flags().BoolVar(&operatorInsecure, "operator-insecure", false, "with --no-auth, serve --operator-addr off loopback without authentication: a trusted private network only (serve warns at start)")
	drain = addDrainFlags(cmd)
	cmd.Flags().BoolVar(&requireSigned, "require-signed-commands", false, "refuse commands on the bus not signed with a producer key or the deployment key (default $"+eventpipe.EnvRequireSignedCommands+")")
	return cmd
}

// envOperatorAddr is serve's --operator-addr default.
const envOperatorAddr = "EVENTPIPE_OPERATOR_ADDR"

// addHTTPLimitFlags adds the --http-* flags of the listeners' connection
// limits to cmd; the function it returns gives the limits: the
// EVENTPIPE_HTTP_* variables' (httpapi.LimitsFromEnv), each overridden by
// its flag when given.
func addHTTPLimitFlags(cmd *cobra.Command) func() (httpapi.Limits, error) {
	var flags httpapi.Limits
	durations := []struct {
		name, env, usage string
		field            func(*httpapi.Limits) *time.Duration
		def              time.Duration
	}{
		{"http-read-header-timeout", httpapi.EnvReadHeaderTimeout, "time a client has to send a request's headers",
			func(l *httpapi.Limits) *time.Duration { return &l.ReadHeaderTimeout }, httpapi.DefaultReadHeaderTimeout},
		{"http-read-timeout", httpapi.EnvReadTimeout, "time a client has to send a whole request, body included",
			func(l *httpapi.Limits) *time.Duration { return &l.ReadTimeout }, httpapi.DefaultReadTimeout},
		{"http-write-timeout", httpapi.EnvWriteTimeout, "time an answer has, from the end of the request's headers",
			func(l *httpapi.Limits) *time.Duration { return &l.WriteTimeout }, httpapi.DefaultWriteTimeout},
		{"http-idle-timeout", httpapi.EnvIdleTimeout, "time an idle keep-alive connection stays open",
			func(l *httpapi.Limits) *time.Duration { return &l.IdleTimeout }, httpapi.DefaultIdleTimeout},
	}
	for _, d := range durations {
		cmd.Flags().DurationVar(d.field(&flags), d.name, 0, fmt.Sprintf("%s, on the API's and the operator's listeners (default $%s, else %s)", d.usage, d.env, d.def))
	}
	cmd.Flags().IntVar(&flags.MaxHeaderBytes, "http-max-header-bytes", 0, fmt.Sprintf("largest request line and headers in bytes; larger get 431 (default $%s, else %d)", httpapi.EnvMaxHeaderBytes, httpapi.DefaultMaxHeaderBytes))
	return func() (httpapi.Limits, error) {
		l, err := httpapi.LimitsFromEnv(os.LookupEnv)
		if err != nil {
			return l, err
		}
		for _, d := range durations {
			if cmd.Flags().Changed(d.name) {
				*d.field(&l) = *d.field(&flags)
			}
		}
		if cmd.Flags().Changed("http-max-header-bytes") {
			l.MaxHeaderBytes = flags.MaxHeaderBytes
		}
		return l, l.Validate()
	}
}
