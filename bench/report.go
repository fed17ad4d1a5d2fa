package bench

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"strings"

	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/report/charts"
)

// writeReport writes report.json, stages.png, report.md and report.html.
func writeReport(dir string, rep *Report) error {
	body, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfs.WriteFile(filepath.Join(dir, "report.json"), append(body, '\n')); err != nil {
		return err
	}
	var engines []string
	var stageTimes [][]float64 // stage → engine
	for range Stages {
		stageTimes = append(stageTimes, nil)
	}
	for _, e := range rep.Engines {
		if e.Skipped != "" {
			continue
		}
		engines = append(engines, e.Engine)
		for si, s := range Stages {
			stageTimes[si] = append(stageTimes[si], e.Stages[s])
		}
	}
	chart := filepath.Join(dir, "stages.png")
	if len(engines) > 0 {
		if err := charts.StackedBars(chart, engines, Stages, stageTimes, "Wall time per stage (median of repeats)", "seconds"); err != nil {
			return err
		}
	}
	md := reportMarkdown(rep)
	if err := atomicfs.WriteFile(filepath.Join(dir, "report.md"), []byte(md)); err != nil {
		return err
	}
	png, _ := os.ReadFile(chart)
	page := "<!doctype html><meta charset=utf-8><title>lulc bench</title>" +
		"<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right;max-width:30em;overflow-wrap:anywhere}th{background:#eee}</style>\n" +
		markdownToHTML(md)
	if len(png) > 0 {
		page += `<p><img alt="stages" src="data:image/png;base64,` + base64.StdEncoding.EncodeToString(png) + `"></p>`
	}
	return atomicfs.WriteFile(filepath.Join(dir, "report.html"), []byte(page+"\n"))
}

func reportMarkdown(rep *Report) string {
	var b strings.Builder
	h := rep.Host
	fmt.Fprintf(&b, "# lulc bench\n\n")
	fmt.Fprintf(&b, "## Hardware and software\n\n")
	fmt.Fprintf(&b, "- CPU: %s, %d cores, %.1f GB RAM; %s\n", h.CPU, h.Cores, float64(h.RAM)/1e9, h.OS)
	if h.GPU != "" {
		fmt.Fprintf(&b, "- GPU: %s, %.1f GB, CUDA driver %s\n", h.GPU, float64(h.GPUMem)/1e9, h.Driver)
	} else {
		fmt.Fprintf(&b, "- GPU: none usable (%s)\n", h.GPUNote)
	}
	fmt.Fprintf(&b, "- lulc %s, %s, GDAL %s\n\n", h.Lulc, h.Go, h.GDAL)
	in := rep.Inputs
	fmt.Fprintf(&b, "## Inputs\n\n%d tile(s), %d pixels, %d bands, %d dates, %.1f MB on disk; config sha256 %s…, catalog sha256 %s…\n\n",
		in.Tiles, in.Pixels, in.Bands, in.Dates, float64(in.Bytes)/1e6, short(rep.ConfigHash), short(in.Digest))
	writeOnePass(&b, rep)
	fmt.Fprintf(&b, "## Per command: wall time per stage (seconds, median of repeats)\n\nThe same job as separate commands, the stack on disk between them.\n\n| engine | %s | total | speed-up vs cpu | speed-up vs golearn |\n|---|%s---|---|---|\n",
		strings.Join(Stages, " | "), strings.Repeat("---|", len(Stages)))
	base := map[string]float64{}
	for _, e := range rep.Engines {
		base[e.Engine] = e.Total
	}
	var skipped []string
	for _, e := range rep.Engines {
		if e.Skipped != "" {
			// The row keeps the table's columns; the reason goes below it,
			// where a long one cannot break the table.
			fmt.Fprintf(&b, "| %s |%s n/a | n/a | n/a |\n", e.Engine, strings.Repeat(" n/a |", len(Stages)))
			skipped = append(skipped, fmt.Sprintf("- %s skipped: %s\n", e.Engine, e.Skipped))
			continue
		}
		fmt.Fprintf(&b, "| %s |", e.Engine)
		for _, s := range Stages {
			fmt.Fprintf(&b, " %s |", seconds(e.Stages[s]))
		}
		fmt.Fprintf(&b, " %.3f | %s | %s |\n", e.Total, ratio(base["cpu"], e.Total), ratio(base["golearn"], e.Total))
	}
	if len(skipped) > 0 {
		b.WriteString("\n" + strings.Join(skipped, ""))
	}
	fmt.Fprintf(&b, "\n(golearn trains only: no model file to predict with; its total is its ingest and training time. Its bootstrap reads math/rand's shared source from many goroutines, so its accuracy can vary between runs even when its inputs are identical.)\n\n")
	fmt.Fprintf(&b, "## Throughput, accuracy, reproducibility, cost\n\n| engine | tiles/s (whole job) | pixels/s (ingest+predict) | MB/s read | OA | kappa | macro-F1 | map OA | reproducible | $/tile | $/100 GB |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, e := range rep.Engines {
		if e.Skipped != "" {
			continue
		}
		repro := "not checked (1 repeat)"
		if e.Reproducible != nil {
			repro = fmt.Sprint(*e.Reproducible)
			if !*e.Reproducible {
				repro += ": " + strings.Join(e.Differences, ", ")
			}
		}
		// An engine that makes no map (golearn) has no map figures.
		mapOA, pixels := "n/a", "n/a"
		if e.Stages["predict"] > 0 {
			mapOA, pixels = fmt.Sprintf("%.4f", e.MapAccuracy), fmt.Sprintf("%.0f", e.PixelsPerSec)
		}
		fmt.Fprintf(&b, "| %s | %.4f | %s | %.1f | %.4f | %.4f | %.4f | %s | %s | %.6f | %.4f |\n", e.Engine, e.TilesPerSec, pixels, e.MBPerSec,
			e.Accuracy, e.Kappa, e.MacroF1, mapOA, repro, e.CostPerTile, e.CostPer100GB)
	}
	if rep.CPUvsGPU != nil {
		fmt.Fprintf(&b, "\nCPU and GPU outputs byte-identical: %v\n", *rep.CPUvsGPU)
	}
	if rep.PeakGPU > 0 {
		fmt.Fprintf(&b, "\nPeak device memory held by lulc's GPU engine: %.2f GB (its own allocations; the CUDA context adds a few hundred MB).\n", float64(rep.PeakGPU)/1e9)
	}
	fmt.Fprintf(&b, "\nPeak host RSS: %.2f GB.\n\n![stages](stages.png)\n\n## How to reproduce\n\n```sh\n%s\n```\n", float64(rep.PeakRSS)/1e9, rep.Command)
	return b.String()
}

// writeOnePass writes the headline: the whole job as lulc run does it.
func writeOnePass(b *strings.Builder, rep *Report) {
	var cpu float64
	for _, e := range rep.Engines {
		if e.Engine == "cpu" {
			cpu = e.OnePass
		}
	}
	fmt.Fprintf(b, "## The whole job in one pass (lulc run; seconds, median of repeats)\n\n| engine | total | composite | sample | fit | predict stream | wait for encoders | speed-up vs cpu | $/tile |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, e := range rep.Engines {
		if e.OnePass == 0 {
			continue
		}
		s := e.OnePassStages
		fmt.Fprintf(b, "| %s | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %s | %.6f |\n", e.Engine, e.OnePass,
			s["composite"], s["sample"], s["fit"], s["stream"], s["wait"], ratio(cpu, e.OnePass), e.OnePassCost)
	}
	if rep.CPUvsGPUOnePass != nil {
		fmt.Fprintf(b, "\nCPU and GPU one-pass outputs (model, samples, maps) byte-identical: %v\n", *rep.CPUvsGPUOnePass)
	}
	fmt.Fprintf(b, "\n")
}

// short is a digest's first 12 characters, or "(none: remote inputs)".
func short(digest string) string {
	if len(digest) < 12 {
		return "(none: remote inputs)"
	}
	return digest[:12]
}

// seconds is a stage's time, or n/a for a stage the engine does not run
// (golearn writes no model, so it neither predicts nor evaluates).
func seconds(v float64) string {
	if v == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3f", v)
}

func ratio(base, t float64) string {
	if base == 0 || t == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", base/t)
}

// markdownToHTML renders the report's small Markdown subset (headings,
// tables, lists, code blocks, paragraphs).
func markdownToHTML(md string) string {
	var b strings.Builder
	lines := strings.Split(md, "\n")
	inCode, inTable := false, false
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "```"):
			if inCode {
				b.WriteString("</pre>\n")
			} else {
				b.WriteString("<pre>")
			}
			inCode = !inCode
		case inCode:
			b.WriteString(html.EscapeString(l) + "\n")
		case strings.HasPrefix(l, "|"):
			cells := strings.Split(strings.Trim(l, "|"), "|")
			if strings.HasPrefix(strings.TrimSpace(cells[0]), "---") {
				continue
			}
			tag := "td"
			if !inTable {
				b.WriteString("<table>\n")
				inTable, tag = true, "th"
			}
			b.WriteString("<tr>")
			for _, c := range cells {
				fmt.Fprintf(&b, "<%s>%s</%s>", tag, html.EscapeString(strings.TrimSpace(c)), tag)
			}
			b.WriteString("</tr>\n")
		default:
			if inTable {
				b.WriteString("</table>\n")
				inTable = false
			}
			switch {
			case strings.HasPrefix(l, "## "):
				fmt.Fprintf(&b, "<h2>%s</h2>\n", html.EscapeString(l[3:]))
			case strings.HasPrefix(l, "# "):
				fmt.Fprintf(&b, "<h1>%s</h1>\n", html.EscapeString(l[2:]))
			case strings.HasPrefix(l, "- "):
				fmt.Fprintf(&b, "<li>%s</li>\n", html.EscapeString(l[2:]))
			case strings.HasPrefix(l, "!["):
			case strings.TrimSpace(l) != "":
				fmt.Fprintf(&b, "<p>%s</p>\n", html.EscapeString(l))
			}
		}
	}
	if inTable {
		b.WriteString("</table>\n")
	}
	return b.String()
}
