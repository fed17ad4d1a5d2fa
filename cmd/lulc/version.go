package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/lulc/lulc/geo/raster"
)

// version is set at build time from git describe (see the Makefile); a plain
// go build falls back to the module and VCS information Go records.
var version = ""

func lulcVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", ""
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	if rev != "" {
		return "g" + rev[:min(12, len(rev))] + dirty
	}
	return "devel"
}

func newVersionCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the lulc, Go and GDAL versions",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// --json: the same three versions, by name (quiet or not: the
			// versions are the command's whole result).
			if a.json {
				a.summary(map[string]string{"lulc": lulcVersion(), "go": runtime.Version(), "platform": runtime.GOOS + "/" + runtime.GOARCH, "gdal": raster.GDALVersion()})
				return nil
			}
			fmt.Fprintf(a.stdout, "lulc %s\ngo   %s %s/%s\ngdal %s\n",
				lulcVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH, raster.GDALVersion())
			return nil
		},
	}
}
