// Package layout holds the rule of lulc's folders, checked by its test:
// the top-level folders stand in an order (docs/architecture.md, "Layout")
// and a package imports only from its own folder and folders below it.
package layout

// Order is lulc's top-level folders, from the command line at the top to
// the machinery at the bottom: imports point down it.
var Order = []string{"cmd", "bench", "pipeline", "stage", "scale", "report", "source", "device", "learn", "pixel", "geo", "configs", "internal", "notebooks"}

// Apart is what hangs off the side of the core: per folder, packages its
// code must not import although they lie below it (its tests may:
// docs/architecture.md, Packages). The stages and the job layer reach
// golearn through stage.Options.Golearn and scikit-learn through the
// bench, and draw through stage.Options.Charts, set by the commands and
// the bench.
var Apart = map[string][]string{
	"pipeline": {"report/charts", "learn/baseline", "learn/sklearn"},
	"stage":    {"report/charts", "learn/baseline", "learn/sklearn"},
}
