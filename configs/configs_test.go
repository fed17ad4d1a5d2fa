package configs

import (
	"strings"
	"testing"
)

// TestSyntaxErrorLine checks that a syntax error names the line that is
// wrong, not the line (counted from zero) where its block began.
func TestSyntaxErrorLine(t *testing.T) {
	var v map[string]any
	cases := []struct {
		name, doc, want string
	}{
		{"bad indent", "source:\n  catalog: x\n bad: y\n", "line 3: "},
		{"list after flow", "a: 1\nb:\n  c: [1, 2]\n  - 3\n", "line 4: "},
		{"unclosed flow", "source:\n  catalog: x\n  limit: [1\narea:\n  bbox: 1\n", "line 3: "},
		{"tab", "source:\n\tcatalog: x\n", "line 2: "},
		{"second of two faults", "a:\n  b: 1\n c: 2\nd: 3\ne:\n  f: 1\n g: 2\n", "line 3: "},
		{"after a multi-line flow", "a: [1,\n  2]\nb: 3\nc:\n  d: 1\n e: 2\n", "line 6: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := DecodeStrict([]byte(c.doc), &v)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to name %q", err, c.want)
			}
		})
	}
}

// TestUnknownKey keeps strict decoding: a misspelt key is an error.
func TestUnknownKey(t *testing.T) {
	var v struct {
		Known int `yaml:"known"`
	}
	err := DecodeStrict([]byte("known: 1\nknwon: 2\n"), &v)
	if err == nil || !strings.Contains(err.Error(), "knwon") || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("got %v", err)
	}
}
