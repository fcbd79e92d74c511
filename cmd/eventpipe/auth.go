package main

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe/dev/stack"
	"github.com/eventpipe/eventpipe/eventstore"
	"github.com/eventpipe/eventpipe/httpapi/auth"
	"github.com/eventpipe/eventpipe/httpapi/auth/mint"
)

func authCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "Tokens for the HTTP API from the local stack's key set",
	}
	var (
		scopes  []string
		ttl     time.Duration
		keyFile string
	)
	token := &cobra.Command{
		Use:   "token <subject>",
		Short: "Print a JWT for subject, signed with the local stack's key (TOKEN=$(eventpipe auth token demo))",
		Long: `token prints a JWT for subject, signed with the private key that "eventpipe stack
up" keeps in <stack dir>/secure/auth-keys.json, with the issuer and audience
that "eventpipe stack env" exports in secure mode (EVENTPIPE_AUTH_ISSUER and
EVENTPIPE_AUTH_AUDIENCE when set): what "eventpipe serve" on the secured stack
accepts. The stack's policy (secure/auth-policy.json) grants the subjects
` + strings.Join(stack.LocalAuthSubjects, " and ") + ` everything; a token for another subject is refused with
403 until the policy grants it something. --ttl is at most the longest
lifetime serve accepts (EVENTPIPE_AUTH_MAX_TOKEN_LIFETIME, default 24h).
For the local stack only: a deployment's tokens come from its identity provider.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := localIssuerConfig(keyFile)
			if err != nil {
				return err
			}
			iss, err := mint.New(cfg)
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("auth token: no key set at %s: run `eventpipe stack up --secure` (or pass --key-file): %w", cfg.KeyFile, err)
			}
			if err != nil {
				return err
			}
			tok, err := iss.Token(cmd.Context(), args[0], mint.TokenOptions{Scopes: scopes, Lifetime: ttl})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			return nil
		},
	}
	f := token.Flags()
	f.StringSliceVar(&scopes, "scope", nil, "a scope of the token's \"scope\" claim (repeat or comma-separate)")
	f.DurationVar(&ttl, "ttl", 0, "the token's lifetime (default 1h, or the longest serve accepts when that is shorter)")
	f.StringVar(&keyFile, "key-file", "", "the private key set (default <stack dir>/secure/auth-keys.json)")
	cmd.AddCommand(token)
	return cmd
}

// localIssuerConfig is the local stack's signer: its key set (or
// keyFile), and the issuer, audience and longest lifetime serve reads
// from the environment, defaulting to the stack's.
func localIssuerConfig(keyFile string) (mint.Config, error) {
	if keyFile == "" {
		s, err := stack.New(stack.Config{Out: os.Stderr})
		if err != nil {
			return mint.Config{}, err
		}
		files, _ := stack.SecureMaterial(s.Dir()) // the paths, whatever is missing
		keyFile = files.AuthKeys
	}
	cfg := mint.Config{
		KeyFile:  keyFile,
		Issuer:   cmp.Or(strings.TrimSpace(os.Getenv(auth.EnvIssuer)), stack.LocalAuthIssuer),
		Audience: cmp.Or(strings.TrimSpace(os.Getenv(auth.EnvAudience)), stack.LocalAuthAudience),
	}
	if v := strings.TrimSpace(os.Getenv(auth.EnvMaxLifetime)); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return cfg, &eventstore.ValidationError{Field: auth.EnvMaxLifetime, Reason: err.Error()}
		}
		cfg.MaxLifetime = d
	}
	return cfg, nil
}
