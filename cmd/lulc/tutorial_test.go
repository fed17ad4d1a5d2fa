package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fence is a fenced block at the start of a line: its language and body.
var fence = regexp.MustCompile("(?ms)^```(\\w+)\\n(.*?)^```$")

// timing matches what differs from run to run in lulc's output.
var timing = regexp.MustCompile(`\d(ms|s|µs)\b|MB/s`)

// TestYourDataTutorial runs docs/your-data.md as written: each yaml block
// is written to the file its first comment names, each sh block runs in
// bash with a freshly built lulc first on PATH, and each text block after
// an sh block must be what it printed, line by line, but for timings (log
// lines are matched without their time and attributes).
func TestYourDataTutorial(t *testing.T) {
	if testing.Short() {
		t.Skip("builds lulc and runs the tutorial")
	}
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "your-data.md"))
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "lulc"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build lulc: %v\n%s", err, out)
	}
	work := t.TempDir()
	var last []byte // the output of the last sh block
	blocks := fence.FindAllStringSubmatch(string(doc), -1)
	ran := 0
	for _, b := range blocks {
		lang, body := b[1], b[2]
		switch lang {
		case "yaml":
			first, _, _ := strings.Cut(body, "\n")
			name := strings.Fields(strings.TrimPrefix(first, "#"))
			if len(name) == 0 || !strings.HasSuffix(strings.TrimSuffix(name[0], ":"), ".yaml") {
				t.Fatalf("yaml block without its file name on its first line: %q", first)
			}
			if err := os.WriteFile(filepath.Join(work, strings.TrimSuffix(name[0], ":")), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		case "sh":
			cmd := exec.Command("bash", "-euo", "pipefail", "-c", body)
			cmd.Dir = work
			cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", body, err, out)
			}
			last = out
			ran++
		case "text":
			if last == nil {
				continue // an example, not an output
			}
			checkShown(t, body, last)
			last = nil
		}
	}
	if ran < 5 {
		t.Fatalf("only %d sh blocks ran", ran)
	}
	for _, f := range []string{"map/31tej_east/class.tif", "check/metrics.json", "model/model.lulcrf"} {
		if _, err := os.Stat(filepath.Join(work, f)); err != nil {
			t.Errorf("the tutorial made no %s: %v", f, err)
		}
	}
	metrics, _ := os.ReadFile(filepath.Join(work, "check", "metrics.json"))
	if !bytes.Contains(metrics, []byte(`"area_estimate"`)) {
		t.Error("check/metrics.json holds no area estimate")
	}
}

// checkShown fails for each line of shown, but timings, that out does not
// hold: a log line (level=…) anywhere in a line of out, others as a line.
func checkShown(t *testing.T, shown string, out []byte) {
	t.Helper()
	lines := strings.Split(string(out), "\n")
	for _, want := range strings.Split(strings.TrimRight(shown, "\n"), "\n") {
		if timing.MatchString(want) {
			continue
		}
		found := false
		for _, got := range lines {
			if strings.HasPrefix(want, "level=") && strings.Contains(got, want) || got == want {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("the docs show a line the run did not print: %q\nit printed:\n%s", want, out)
		}
	}
}
