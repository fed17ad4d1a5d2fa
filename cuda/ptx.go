package cuda

import (
	_ "embed"
	"os"
	"regexp"
)

//go:generate bash kernels/gen.sh

// ptx is lulc's kernels compiled by kernels/gen.sh, committed so that no
// CUDA toolkit is needed to build or run lulc.
//
//go:embed kernels/lulc.ptx
var ptx string

// PTX returns the kernels' PTX: the embedded module, or the file named by
// LULC_PTX (for trying freshly compiled kernels on a GPU host before they
// are committed).
func PTX() string {
	if p := os.Getenv("LULC_PTX"); p != "" {
		if b, err := os.ReadFile(p); err == nil {
			return string(b)
		}
	}
	return ptx
}

var versionRE = regexp.MustCompile(`(?m)^\.version\s+(\d+)\.(\d+)`)

// ptxVersion returns the module's PTX ISA version ("9.0"), or "none".
func ptxVersion() string {
	m := versionRE.FindStringSubmatch(PTX())
	if m == nil {
		return "none"
	}
	return m[1] + "." + m[2]
}
