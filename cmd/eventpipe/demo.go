package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func demoCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "demo",
		Short: "Bring the stack up and show what runs where",
		Args:  cobra.NoArgs,
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
			fmt.Fprintln(out, "What runs where:")
			if err := printStatus(cmd, s); err != nil {
				return err
			}
			fmt.Fprintln(out)
			fmt.Fprintln(out, "Point your shell at it with:  eval \"$(bin/eventpipe stack env)\"")
			fmt.Fprintln(out, "Stop it with:                 make stack-down")
			return nil
		},
	}
}
