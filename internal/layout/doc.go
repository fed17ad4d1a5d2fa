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

// Stages is the rule inside stage/: a stage's package imports the base
// (stage) and the configs (stage/config), and of the other stages only
// those listed here; the base imports only the configs, the configs no
// stage. Data flows one way: scenes into ingest, a training input into
// chips; the job layer (pipeline) composes the rest.
var Stages = map[string][]string{
	"stage":        {"stage/config"},
	"stage/config": {},
	"stage/ingest": {"stage", "stage/config", "stage/scenes"},
	"stage/chips":  {"stage", "stage/config", "stage/train"},
}

// StageBase is what a stage not listed in Stages may import of stage/.
var StageBase = []string{"stage", "stage/config"}
