package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/eventpipe/eventpipe"
	"github.com/eventpipe/eventpipe/schemas"
)

// defaultSchemasFile is the committed snapshot of the built-in event
// schemas, relative to the repository's root.
const defaultSchemasFile = "schemas/events.json"

func schemasCommand(cat *eventpipe.Catalog) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "schemas check|write",
		Short: "Check the event schemas of the code against their committed snapshot, or write it",
		Long: `Every event type of the catalogue has a schema: its current version (the last
upcaster's target, 1 without one) and its payload's JSON shape, from the Go type
of its typed definition. 'schemas check' compares them with the committed
snapshot and fails, naming the type, the version and the field, on a change that
events already stored would not survive: an event type removed or renamed, a
field removed or given another JSON kind, without a new version. Bump the
type's version with an upcaster (Catalog.Upcasters) and the change passes; then,
as after adding a field or an event type, 'schemas write' records it. Needs no
service.`,
	}
	cmd.PersistentFlags().StringVar(&file, "file", defaultSchemasFile, "the snapshot of the event schemas")

	var update bool
	check := &cobra.Command{
		Use:   "check",
		Short: "Fail on an event schema change that would break stored events",
		Example: `  eventpipe schemas check
  eventpipe schemas check --update   # and write the snapshot when nothing breaks`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			current, err := cat.EventSchemas()
			if err != nil {
				return err
			}
			data, err := os.ReadFile(file)
			if errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("no snapshot at %s: write one with 'eventpipe schemas write --file %s'", file, file)
			}
			if err != nil {
				return err
			}
			committed, err := schemas.Parse(data)
			if err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			report := schemas.Check(committed, current)
			out := cmd.OutOrStdout()
			for _, n := range report.Notes {
				fmt.Fprintln(out, "note:", n)
			}
			if err := report.Err(); err != nil {
				return fmt.Errorf("%s: %w", file, err)
			}
			switch {
			case report.Stale() && update:
				if err := writeSchemas(file, current); err != nil {
					return err
				}
				fmt.Fprintf(out, "%d event types: nothing breaks; %s written\n", len(current.Events), file)
			case report.Stale():
				fmt.Fprintf(out, "%d event types: nothing breaks; %s is out of date: run 'eventpipe schemas write'\n", len(current.Events), file)
			default:
				fmt.Fprintf(out, "%d event types: as in %s\n", len(current.Events), file)
			}
			return nil
		},
	}
	check.Flags().BoolVar(&update, "update", false, "write the snapshot afterwards when nothing breaks and it is out of date")

	write := &cobra.Command{
		Use:   "write",
		Short: "Write the snapshot of the event schemas from the code",
		Long: `write records the code's event schemas as the snapshot, whatever it held: run it
after a change 'schemas check' passes (a field or a type added, a version bumped
with an upcaster), and commit the file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			current, err := cat.EventSchemas()
			if err != nil {
				return err
			}
			if err := writeSchemas(file, current); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d event types written to %s\n", len(current.Events), file)
			return nil
		},
	}
	cmd.AddCommand(check, write)
	return cmd
}

// writeSchemas writes r to file.
func writeSchemas(file string, r schemas.Registry) error {
	b, err := r.Marshal()
	if err != nil {
		return err
	}
	return os.WriteFile(file, b, 0o644)
}
