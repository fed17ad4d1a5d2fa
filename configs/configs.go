// Package configs embeds lulc's checked-in YAML configs, so that the binary
// runs its demo without a checkout.
package configs

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"

	"gopkg.in/yaml.v3"
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

// DecodeStrict decodes YAML into v, rejecting keys v has no field for, so
// that a misspelt key is an error rather than a silently ignored setting.
func DecodeStrict(raw []byte, v any) error {
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("config is empty")
		}
		return fmt.Errorf("parse: %w", err)
	}
	return nil
}
