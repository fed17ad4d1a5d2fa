package bench

import (
	"strings"
	"testing"
)

// TestReportTablesKeepTheirShape checks the report's tables as a reader
// sees them: every row has the header's columns, an engine without a map
// shows n/a rather than zeros, and a skipped engine's long reason goes
// below its table, not into it.
func TestReportTablesKeepTheirShape(t *testing.T) {
	stages := map[string]float64{"ingest": 1, "sample": 2, "train": 3, "predict": 4, "evaluate": 5}
	rep := &Report{Engines: []EngineReport{
		{Engine: "cpu", Stages: stages, Total: 15, MapAccuracy: 0.9, PixelsPerSec: 1e6},
		{Engine: "golearn", Stages: map[string]float64{"ingest": 1, "sample": 2, "train": 30}, Total: 33},
		{Engine: "gpu", Skipped: "no usable GPU: " + strings.Repeat("cuInit failed | the driver said no; ", 8)},
	}}
	md := reportMarkdown(rep)
	var table []string
	for _, line := range strings.Split(md+"\n", "\n") {
		if strings.HasPrefix(line, "|") {
			table = append(table, line)
			continue
		}
		for _, row := range table {
			if strings.Count(row, "|") != strings.Count(table[0], "|") {
				t.Errorf("row %q has another number of cells than its header %q", row, table[0])
			}
		}
		table = nil
	}
	for _, want := range []string{"| golearn | 1.000 | 2.000 | 30.000 | n/a | n/a |", "- gpu skipped: no usable GPU"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| golearn |") && strings.Contains(line, "not checked") {
			cells := strings.Split(line, "|")
			if pixels, mapOA := strings.TrimSpace(cells[3]), strings.TrimSpace(cells[8]); pixels != "n/a" || mapOA != "n/a" {
				t.Errorf("golearn's map figures: pixels/s %q, map OA %q, want n/a", pixels, mapOA)
			}
		}
	}
}
