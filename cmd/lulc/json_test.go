package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// runCapture runs lulc in process with args, returning its exit code,
// stdout and stderr.
func runCapture(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestJSONFailure checks --json's failure: an object on stdout with the
// error and the exit code (the text still on stderr), for a failed
// command, a usage error and LULC_JSON.
func TestJSONFailure(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  string
		code int
		want string
	}{
		{[]string{"--json", "ingest", "-c", "nonexistent.yaml", "--out", t.TempDir() + "/x"}, "", exitFailure, "nonexistent.yaml"},
		{[]string{"--json", "bogus"}, "", exitUsage, "unknown command"},
		{[]string{"bogus"}, "1", exitUsage, "unknown command"},
	} {
		t.Setenv("LULC_JSON", c.env)
		code, stdout, stderr := runCapture(c.args...)
		var got struct {
			Error    string `json:"error"`
			ExitCode int    `json:"exit_code"`
		}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("%v: stdout %q is not one JSON object: %v", c.args, stdout, err)
		}
		if code != c.code || got.ExitCode != code || !strings.Contains(got.Error, c.want) || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, object %+v, stderr %q", c.args, code, got, stderr)
		}
	}
	// A bad LULC_JSON is said once, and is no request for JSON.
	t.Setenv("LULC_JSON", "yes")
	code, stdout, stderr := runCapture("version")
	if code != exitUsage || stdout != "" || strings.Count(stderr, "LULC_JSON") != 1 {
		t.Errorf("LULC_JSON=yes: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestJSONVersionAndConfigs checks that version, doctor and config list
// answer --json with their results as JSON.
func TestJSONVersionAndConfigs(t *testing.T) {
	t.Setenv("LULC_JSON", "")
	code, stdout, _ := runCapture("--json", "version")
	var v map[string]string
	if err := json.Unmarshal([]byte(stdout), &v); code != 0 || err != nil || v["lulc"] == "" || v["go"] == "" || v["gdal"] == "" || v["platform"] == "" {
		t.Errorf("version --json: exit %d, %q (%v)", code, stdout, err)
	}
	code, stdout, _ = runCapture("--json", "doctor")
	var d struct {
		ComputeOn string   `json:"compute_on"`
		Report    []string `json:"report"`
	}
	if err := json.Unmarshal([]byte(stdout), &d); code != 0 || err != nil || (d.ComputeOn != "cpu" && d.ComputeOn != "gpu") || len(d.Report) == 0 {
		t.Errorf("doctor --json: exit %d, %q (%v)", code, stdout, err)
	}
	code, stdout, _ = runCapture("--json", "config", "list")
	var list []struct{ Name, Summary string }
	if err := json.Unmarshal([]byte(stdout), &list); code != 0 || err != nil || len(list) < 10 || list[0].Name == "" || list[0].Summary == "" {
		t.Errorf("config list --json: exit %d, %d entries (%v)", code, len(list), err)
	}
}
