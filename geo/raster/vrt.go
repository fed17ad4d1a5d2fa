package raster

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/airbusgeo/godal"
)

// BuildVRT writes a GDAL VRT mosaic at path over the rasters sources (all
// on one CRS and resolution), sources named relative to the VRT so that
// the directory tree can move. Where sources overlap, the later in the
// list wins (GDAL's rule: each source is drawn over the ones before it).
func BuildVRT(path string, sources []string) error {
	register()
	if len(sources) == 0 {
		return fmt.Errorf("vrt %s: no sources", path)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("vrt %s: %w", path, err)
	}
	abs := make([]string, len(sources))
	for i, s := range sources {
		if abs[i], err = filepath.Abs(s); err != nil {
			return fmt.Errorf("vrt %s: %w", path, err)
		}
	}
	tmp := path + ".partial"
	ds, err := godal.BuildVRT(tmp, abs, nil)
	if err != nil {
		return fmt.Errorf("vrt %s: %w", path, err)
	}
	if err := ds.Close(); err != nil {
		return fmt.Errorf("vrt %s: %w", path, err)
	}
	// GDAL names sources outside the VRT's directory absolutely: name
	// them relative to it instead.
	body, err := os.ReadFile(tmp)
	if err != nil {
		return fmt.Errorf("vrt %s: %w", path, err)
	}
	xml := string(body)
	for _, a := range abs {
		rel, err := filepath.Rel(dir, a)
		if err != nil {
			return fmt.Errorf("vrt %s: %w", path, err)
		}
		xml = strings.ReplaceAll(xml, `relativeToVRT="0">`+a+`<`, `relativeToVRT="1">`+rel+`<`)
	}
	if err := os.WriteFile(tmp, []byte(xml), 0o644); err != nil {
		return fmt.Errorf("vrt %s: %w", path, err)
	}
	return os.Rename(tmp, path)
}
