// Package configs embeds lulc's checked-in YAML configs, so that the binary
// runs its demo without a checkout.
package configs

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
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

// Find returns the config file name, or else the embedded config of that
// name, so that configs that name others ("ingest: ingest-tiny.yaml") work
// from a checkout and from the bare binary alike.
func Find(name string) ([]byte, error) {
	b, err := os.ReadFile(name)
	if err == nil {
		return b, nil
	}
	if b, rerr := files.ReadFile(name); rerr == nil {
		return b, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no config file %s and no embedded config of that name", name)
	}
	return nil, fmt.Errorf("read config: %w", err)
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
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return fmt.Errorf("parse: %w", locateSyntaxError(raw, err))
		}
		return fmt.Errorf("parse: %w", err)
	}
	return nil
}

// syntaxLine matches the position the YAML parser puts in front of a
// syntax error.
var syntaxLine = regexp.MustCompile(`^yaml: line \d+: `)

// locateSyntaxError rewrites the line number of a YAML syntax error. The
// parser reports the line where the enclosing construct began, counted from
// zero, so an error on line 18 of a block that starts on line 17 reads
// "line 16". The faulty line is found instead as the first line after the
// longest prefix of the document that still parses: every line before it
// is well formed, and the document breaks with it.
func locateSyntaxError(raw []byte, err error) error {
	msg := err.Error()
	if !strings.HasPrefix(msg, "yaml: ") {
		return err
	}
	lines := strings.SplitAfter(string(raw), "\n")
	bad := len(lines)
	for k := len(lines) - 1; k >= 0; k-- {
		var n yaml.Node
		if yaml.Unmarshal([]byte(strings.Join(lines[:k], "")), &n) == nil {
			bad = k + 1
			break
		}
	}
	problem := strings.TrimPrefix(syntaxLine.ReplaceAllString(msg, ""), "yaml: ")
	text := ""
	if bad <= len(lines) {
		text = strings.TrimRight(lines[bad-1], "\r\n")
	}
	return fmt.Errorf("yaml: line %d: %s (%q)", bad, problem, text)
}
