package cuda

import (
	_ "embed"
	"regexp"
)

//go:generate bash kernels/gen.sh

// ptx is lulc's kernels compiled by kernels/gen.sh, committed so that no
// CUDA toolkit is needed to build or run lulc.
//
//go:embed kernels/lulc.ptx
var ptx string

// PTX returns lulc's kernels as committed (the embedded module).
func PTX() string { return ptx }

var versionRE = regexp.MustCompile(`(?m)^\.version\s+(\d+)\.(\d+)`)

// ptxVersion returns a module's PTX ISA version ("9.0"), or "none".
func ptxVersion(src string) string {
	m := versionRE.FindStringSubmatch(src)
	if m == nil {
		return "none"
	}
	return m[1] + "." + m[2]
}
