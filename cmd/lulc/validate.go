package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/lulc/lulc/source/stacext"
)

func newValidateCmd(a *app) *cobra.Command {
	var baseURL string
	cmd := &cobra.Command{
		Use:   "validate PATH",
		Short: "Check a STAC catalog, collection or item offline: schemas and checksums",
		Long: `validate checks the STAC document at PATH (catalog.json, collection.json or an
item; a directory stands for the collection.json or catalog.json it holds) and every
catalog, collection and item it links as child or item, without a network:

  - each against the STAC core schema of its type and version and the schemas of its
    stac_extensions, which lulc carries (those of the versions its own documents
    declare; a document that declares another is reported, not fetched);
  - each local asset that records file:checksum (BLAKE3 or SHA-256) and file:size,
    against the file.

It checks lulc's outputs (ingest stacks, predict and run maps, collect's collection,
synth's scenes) and other catalogs that use those versions. A fault names the
document and what is wrong (exit 1). An output written with --base-url is checked
before it is published with the same --base-url: its links under that URL are read
from PATH's directory.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path := args[0]
			if fi, err := os.Stat(path); err != nil {
				return usagef("%s: %v", path, err)
			} else if fi.IsDir() {
				doc := ""
				for _, name := range []string{"collection.json", "catalog.json"} {
					if _, err := os.Stat(filepath.Join(path, name)); err == nil {
						doc = filepath.Join(path, name)
						break
					}
				}
				if doc == "" {
					return usagef("%s holds no collection.json or catalog.json: name the STAC document to check", path)
				}
				path = doc
			}
			base, err := checkBaseURL(baseURL)
			if err != nil {
				return err
			}
			c, err := stacext.ValidatePublished(path, base)
			if err != nil {
				return err
			}
			if a.summary(map[string]any{"document": path, "documents": c.Documents, "assets": c.Assets}) {
				fmt.Fprintf(a.stdout, "%s: valid: %d STAC document(s) against their schemas, %d asset(s) against their checksums\n", path, c.Documents, c.Assets)
			}
			return nil
		},
	}
	baseURLFlag(cmd, &baseURL)
	return cmd
}
