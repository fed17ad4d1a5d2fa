package main

import (
	"github.com/spf13/cobra"

	"github.com/lulc/lulc/stage"
)

// baseURLFlag registers --base-url on a command that writes a STAC
// collection.
func baseURLFlag(cmd *cobra.Command, v *string) {
	cmd.Flags().StringVar(v, "base-url", "", "URL the output will be published at: STAC links and assets written as absolute URLs under it (docs/stac.md)")
}

// checkBaseURL checks --base-url (empty: none), a usage error if wrong.
func checkBaseURL(base string) (string, error) {
	if base == "" {
		return "", nil
	}
	b, err := stage.CheckBaseURL(base)
	if err != nil {
		return "", usageError{err}
	}
	return b, nil
}
