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
	"strconv"
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

// Names lists the embedded configs' file names, sorted.
func Names() []string {
	entries, _ := files.ReadDir(".")
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// Summary is an embedded config's first comment line, without its "# "
// ("" when it starts with none).
func Summary(name string) string {
	b, err := files.ReadFile(name)
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if !strings.HasPrefix(line, "#") {
		return ""
	}
	return strings.TrimSpace(strings.TrimPrefix(line, "#"))
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
			// Errors from a field's own decoder (a time that does not
			// parse, say) carry no position: name the line that holds
			// the offending value when it can be found.
			return fmt.Errorf("parse: %w", locateValueError(raw, locateSyntaxError(raw, err)))
		}
		return fmt.Errorf("parse: %s", describeTypeErrors(raw, te))
	}
	return nil
}

// typeLine matches one of yaml's type errors: its line and what it says.
var typeLine = regexp.MustCompile(`^line (\d+): (.*)$`)

var (
	// unmarshalErr is a value of the wrong type: "cannot unmarshal !!str
	// `abc` into int".
	unmarshalErr = regexp.MustCompile("^cannot unmarshal !!(\\w+) `(.*)` into (.+)$")
	// unknownField is a key the config has no place for: "field sede not
	// found in type synth.Config".
	unknownField = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
)

// goTypes says in words what a Go type a config value decodes into wants.
var goTypes = map[string]string{
	"int": "a whole number", "int64": "a whole number", "uint64": "a whole number", "uint8": "a whole number from 0 to 255",
	"float64": "a number", "float32": "a number", "bool": "true or false", "string": "a string",
	"time.Time": "a time such as 2024-04-18T10:56:29Z",
}

// describeTypeErrors rewrites yaml's type errors for people: each with its
// line and the text there, an unknown key named as such, and a value of
// the wrong type said in words rather than as a Go type.
func describeTypeErrors(raw []byte, te *yaml.TypeError) string {
	lines := strings.Split(string(raw), "\n")
	var out []string
	for _, e := range te.Errors {
		m := typeLine.FindStringSubmatch(e)
		if m == nil {
			out = append(out, e)
			continue
		}
		n, _ := strconv.Atoi(m[1])
		at := ""
		if n >= 1 && n <= len(lines) {
			at = fmt.Sprintf(" (%s)", strings.TrimSpace(lines[n-1]))
		}
		what := m[2]
		if u := unknownField.FindStringSubmatch(what); u != nil {
			what = fmt.Sprintf("unknown key %q", u[1])
		} else if u := unmarshalErr.FindStringSubmatch(what); u != nil {
			want := goTypes[u[3]]
			if want == "" {
				want = "a " + strings.TrimPrefix(strings.TrimPrefix(u[3], "[]"), "map[string]")
				if strings.HasPrefix(u[3], "[]") {
					want = "a list"
				} else if strings.HasPrefix(u[3], "map[") {
					want = "a mapping"
				}
			}
			what = fmt.Sprintf("%q is not %s", u[2], want)
		}
		out = append(out, fmt.Sprintf("line %d%s: %s", n, at, what))
	}
	return strings.Join(out, "; ")
}

// locateValueError adds the line of a value the error quotes ("parsing
// time \"yesterday\"…") when exactly one line of the config holds it.
func locateValueError(raw []byte, err error) error {
	msg := err.Error()
	i := strings.IndexByte(msg, '"')
	j := strings.IndexByte(msg[i+1:], '"')
	if i < 0 || j <= 0 || strings.HasPrefix(msg, "yaml: line") || strings.Contains(msg, "line ") {
		return err
	}
	quoted := msg[i+1 : i+1+j]
	lines := strings.Split(string(raw), "\n")
	var found []int
	for k, l := range lines {
		if strings.Contains(l, quoted) {
			found = append(found, k)
		}
	}
	if len(found) != 1 {
		return err
	}
	return fmt.Errorf("line %d (%s): %w", found[0]+1, strings.TrimSpace(lines[found[0]]), err)
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
