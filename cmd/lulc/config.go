package main

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/pipeline"
	"github.com/lulc/lulc/stage/config"
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
			if a.json {
				type entry struct {
					Name    string `json:"name"`
					Summary string `json:"summary"`
				}
				var list []entry
				for _, name := range configs.Names() {
					list = append(list, entry{name, configs.Summary(name)})
				}
				a.summary(list)
				return nil
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			for _, name := range configs.Names() {
				fmt.Fprintf(w, "%s\t%s\n", name, configs.Summary(name))
			}
			return w.Flush()
		},
	}
	var defaults bool
	show := &cobra.Command{
		Use:   "show NAME",
		Short: "Print an embedded config, to copy and edit; with --defaults, any config with every default filled in",
		Long: `Print an embedded config, to copy and edit.

With --defaults, NAME is a config file or an embedded config (or train or
run, for one that sets nothing), and what is printed is the config as lulc
reads it: every key the config leaves out has its default, and feature sets
are expanded. A train config can be one line:

  features: default`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return configs.Names(), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			var text bytes.Buffer
			if defaults {
				if err := showDefaults(&text, args[0]); err != nil {
					return err
				}
			} else {
				name := args[0]
				if !strings.HasSuffix(name, ".yaml") {
					name += ".yaml"
				}
				raw, err := configs.Read(name)
				if err != nil {
					return usagef("%v (lulc config list names them)", err)
				}
				text.Write(raw)
			}
			// With --json the YAML is a string in an object, as every
			// command's result is JSON then.
			if a.json {
				a.summary(map[string]any{"name": args[0], "defaults": defaults, "yaml": text.String()})
				return nil
			}
			_, err := cmd.OutOrStdout().Write(text.Bytes())
			return err
		},
	}
	show.Flags().BoolVar(&defaults, "defaults", false, "print the config as lulc reads it, every default filled in")
	cmd.AddCommand(list, show)
	return cmd
}

// showDefaults prints the config name (a file, an embedded config, or
// train or run for an empty one) as lulc reads it, with every default,
// after telling its kind from its top-level keys.
func showDefaults(w io.Writer, name string) error {
	var raw []byte
	switch name {
	case "train":
		raw = []byte("features: default\n")
	case "run":
		raw = []byte("ingest: ingest.yaml\n")
	default:
		var err error
		if raw, err = configs.Find(name); err != nil {
			return usagef("%v (lulc config list names the embedded ones)", err)
		}
	}
	var top map[string]any
	if err := yaml.Unmarshal(raw, &top); err != nil {
		return fmt.Errorf("config %s: %w", name, err)
	}
	var cfg any
	var err error
	switch {
	case top["source"] != nil:
		var c config.IngestConfig
		c, err = config.ParseIngestConfig(raw)
		cfg = c.Redacted()
	case top["ingest"] != nil:
		cfg, err = pipeline.ParseRunConfig(raw)
	case top["features"] != nil || top["input"] != nil || top["classes"] != nil || top["sampling"] != nil || top["forest"] != nil:
		cfg, err = config.ParseTrainConfig(raw)
	default:
		return usagef("config %s: not an ingest (source:), run (ingest:) or train (features:, input:) config: --defaults knows those", name)
	}
	if err != nil {
		return fmt.Errorf("config %s: %w", name, err)
	}
	var doc yaml.Node
	if err := doc.Encode(cfg); err != nil {
		return fmt.Errorf("config %s: %w", name, err)
	}
	prune(&doc)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return fmt.Errorf("config %s: %w", name, err)
	}
	return enc.Close()
}

// prune drops the keys of mappings whose value is empty (an empty string,
// null, or an empty list or mapping once pruned), so that a printed
// config reads back as the same config: an unset list stays unset.
func prune(n *yaml.Node) {
	if n.Kind != yaml.MappingNode {
		for _, c := range n.Content {
			prune(c)
		}
		return
	}
	kept := n.Content[:0]
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		prune(v)
		empty := (v.Kind == yaml.SequenceNode || v.Kind == yaml.MappingNode) && len(v.Content) == 0 ||
			v.Kind == yaml.ScalarNode && (v.Tag == "!!null" || v.Tag == "!!str" && v.Value == "")
		if !empty {
			kept = append(kept, k, v)
		}
	}
	n.Content = kept
}
