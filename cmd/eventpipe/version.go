package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe/buildinfo"
)

func versionCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "The version, VCS commit (and whether the tree was modified) and Go version of this binary",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, out := buildinfo.Read(), cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(info)
			}
			built := "unknown"
			if !info.Time.IsZero() {
				built = info.Time.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(out, "version   %s\ncommit    %s\nmodified  %v\ntime      %s\ngo        %s %s\n",
				info.Version, info.Commit, info.Modified, built, info.GoVersion, info.Platform)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the build information as JSON")
	return cmd
}
