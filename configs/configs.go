// Package configs embeds lulc's checked-in YAML configs, so that the binary
// runs its demo without a checkout.
package configs

import (
	"embed"
	"fmt"
)

//go:embed *.yaml
var files embed.FS

// Read returns the embedded config with the given file name
// ("synth-tiny.yaml").
func Read(name string) ([]byte, error) {
	b, err := files.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("no embedded config %q", name)
	}
	return b, nil
}
