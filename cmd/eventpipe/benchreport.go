package main

import (
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe/internal/benchreport"
)

func benchReportCommand() *cobra.Command {
	var in, out, png string
	cmd := &cobra.Command{
		Use:    "bench-report",
		Short:  "Write go test -bench output as Markdown and a chart (make bench uses it for docs/benchmarks.md and .png)",
		Args:   cobra.NoArgs,
		Hidden: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := os.Open(in)
			if err != nil {
				return err
			}
			defer f.Close()
			rep, err := benchreport.Parse(f)
			if err != nil {
				return err
			}
			w, err := os.Create(out)
			if err != nil {
				return err
			}
			if err := benchreport.Markdown(w, rep, time.Now(), runtime.Version()); err != nil {
				w.Close()
				return err
			}
			if err := w.Close(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d benchmark results written to %s\n", len(rep.Results), out)
			if png == "" {
				return nil
			}
			pf, err := os.Create(png)
			if err != nil {
				return err
			}
			if err := benchreport.Chart(pf, rep, time.Now()); err != nil {
				pf.Close()
				return err
			}
			if err := pf.Close(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "chart written to %s\n", png)
			return nil
		},
	}
	cmd.Flags().StringVar(&in, "in", "", "go test -bench output (required)")
	cmd.Flags().StringVar(&out, "out", "docs/benchmarks.md", "the Markdown file to write")
	cmd.Flags().StringVar(&png, "png", "", "also draw the ratios and the end-to-end latency as a PNG chart here (make bench: docs/benchmarks.png)")
	_ = cmd.MarkFlagRequired("in")
	return cmd
}
