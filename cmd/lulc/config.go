package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/lulc/lulc/configs"
)

// newConfigCmd lists and prints the configs embedded in the binary, which
// every -c takes by name when no file of that name exists.
func newConfigCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config list|show NAME",
		Short: "List and print the configs embedded in lulc (every -c NAME finds them)",
		// Without Args and RunE, cobra prints the help and exits 0 for any
		// argument: lulc config train-real.yaml would look like success.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return usagef("config: unknown subcommand %q: lulc config show %s prints an embedded config, lulc config list names them", args[0], args[0])
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the embedded configs with the first line of each",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			for _, name := range configs.Names() {
				fmt.Fprintf(w, "%s\t%s\n", name, configs.Summary(name))
			}
			return w.Flush()
		},
	}
	show := &cobra.Command{
		Use:   "show NAME",
		Short: "Print an embedded config, to copy and edit",
		Args:  cobra.ExactArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return configs.Names(), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if !strings.HasSuffix(name, ".yaml") {
				name += ".yaml"
			}
			raw, err := configs.Read(name)
			if err != nil {
				return usagef("%v (lulc config list names them)", err)
			}
			_, err = cmd.OutOrStdout().Write(raw)
			return err
		},
	}
	cmd.AddCommand(list, show)
	return cmd
}
