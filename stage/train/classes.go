package train

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/learn/sampling"
	"github.com/lulc/lulc/stage/config"
)

// DrawNotes is what a draw has to say besides its samples: warnings about
// the labels, and the census of labelled pixels by code (sampling.Census).
type DrawNotes struct {
	warnings []string
	census   *sampling.Census
}

// classCodes gives every label code the index of the scheme's class it
// trains as (-1: none): a class's own code, and the codes classes.remap
// maps onto it; a code of the scheme remapped elsewhere is no longer its
// class's.
func classCodes(scheme landcover.Scheme, remap map[uint8]uint8) [256]int {
	var own, out [256]int
	for i := range own {
		own[i] = -1
	}
	for i, c := range scheme.Classes {
		own[c.Code] = i
	}
	out = own
	for from, to := range remap {
		out[from] = own[to]
	}
	return out
}

// classFate is what became of one class's labelled pixels.
type classFate struct {
	labelled, validation, buffered int64
}

// classFates sums the census by the scheme's classes.
func classFates(c *sampling.Census, scheme landcover.Scheme, remap map[uint8]uint8) []classFate {
	out := make([]classFate, len(scheme.Classes))
	for code, k := range classCodes(scheme, remap) {
		if k < 0 || code == 0 {
			continue
		}
		out[k].labelled += c.Labelled[code]
		out[k].validation += c.Validation[code]
		out[k].buffered += c.Buffered[code]
	}
	return out
}

// schemeFitMargin is how many points of the labelled pixels another
// built-in scheme must cover beyond the chosen one for training to say
// that the labels fit it better.
const schemeFitMargin = 5.0

// schemeFitWarning says, when the labels' codes fit a built-in scheme
// better than the chosen one, which, by how much, and the key to change;
// "" when the chosen one fits best, or nothing was counted.
func schemeFitWarning(cfg config.TrainConfig, scheme landcover.Scheme, c *sampling.Census) string {
	if c == nil || c.Partial || c.Total() == 0 {
		return ""
	}
	total := c.Total()
	codes := len(c.Codes())
	share := func(n int64) float64 { return 100 * float64(n) / float64(total) }
	chosen, chosenCodes := c.Covered(scheme, cfg.Remap())
	best, bestCodes, bestName := chosen, 0, ""
	for _, name := range []string{landcover.WorldCover.Name, landcover.EsriIO.Name} {
		s, _ := landcover.Builtin(name)
		if name == scheme.Name {
			continue
		}
		// Another scheme is taken as it is: the remap is the chosen one's.
		if n, k := c.Covered(s, nil); n > best && share(n)-share(chosen) >= schemeFitMargin {
			best, bestCodes, bestName = n, k, name
		}
	}
	if bestName == "" {
		return ""
	}
	return fmt.Sprintf("labels fit %s (%.0f %% of labelled pixels, %d of %d codes) better than the chosen %s (%.0f %%, %d of %d codes): set classes.scheme: %s",
		bestName, share(best), bestCodes, codes, scheme.Name, share(chosen), chosenCodes, codes, bestName)
}

// classWarnings reports the scheme's classes that give no training
// sample: those the labels lack, in one message, apart from those the
// labels hold but the split or its buffer took away, each with its
// counts and the settings that would keep some. Without a census (merged
// draws record none) every such class is reported alike. present is the
// number of classes the labels hold (-1 without a census).
func classWarnings(cfg config.TrainConfig, scheme landcover.Scheme, c *sampling.Census, counts []int) (warnings []string, present int) {
	if c == nil || c.Partial {
		for k, n := range counts {
			if n == 0 {
				warnings = append(warnings, fmt.Sprintf("class %d (%s) has no training samples: the model will never predict it", scheme.Classes[k].Code, scheme.Classes[k].Name))
			}
		}
		return warnings, -1
	}
	remap := cfg.Remap()
	fates := classFates(c, scheme, remap)
	var absent []string
	for k, f := range fates {
		cl := scheme.Classes[k]
		if f.labelled > 0 {
			present++
		}
		switch {
		case counts[k] > 0:
		case f.labelled == 0:
			if to, ok := remap[cl.Code]; ok && to != cl.Code {
				continue // remapped onto another class: no class of its own
			}
			absent = append(absent, fmt.Sprintf("%d (%s)", cl.Code, cl.Name))
		default:
			warnings = append(warnings, lostClassWarning(cfg, cl, f))
		}
	}
	if len(absent) > 0 {
		warnings = append(warnings, fmt.Sprintf("labels: %d of the %d classes of the scheme %s have no labelled pixel, so the model will never predict them: %s",
			len(absent), len(scheme.Classes), scheme.Name, strings.Join(absent, ", ")))
	}
	return warnings, present
}

// lostClassWarning says how a class with labelled pixels came to have no
// training sample: how many went to validation, how many the buffer
// dropped, how many lacked data; and which setting to change.
func lostClassWarning(cfg config.TrainConfig, cl landcover.Class, f classFate) string {
	s := cfg.Sampling
	var parts, fixes []string
	if f.validation > 0 {
		if s.Split == sampling.SplitFeatures {
			parts = append(parts, fmt.Sprintf("%d belong to features the split sent to validation", f.validation))
			fixes = append(fixes, fmt.Sprintf("label it in more features, or lower sampling.validation_fraction (%g)", s.ValidationFraction))
		} else {
			parts = append(parts, fmt.Sprintf("%d lie in validation blocks", f.validation))
			fixes = append(fixes, fmt.Sprintf("a smaller sampling.block_size (%d) spreads it over more blocks", s.BlockSize))
		}
	}
	if f.buffered > 0 {
		parts = append(parts, fmt.Sprintf("sampling.buffer %d dropped the %d training pixels within %d pixels of a validation block", s.Buffer, f.buffered, s.Buffer))
		fixes = append(fixes, fmt.Sprintf("lower sampling.buffer (%d; 0 turns it off)", s.Buffer))
	}
	if rest := f.labelled - f.validation - f.buffered; rest > 0 {
		parts = append(parts, fmt.Sprintf("%d have no data in a band (or weight 0)", rest))
	}
	return fmt.Sprintf("class %d (%s) lost every training pixel to the split: of its %d labelled pixels, %s; the model will never predict it (%s)",
		cl.Code, cl.Name, f.labelled, strings.Join(parts, ", "), strings.Join(append(fixes, "or label more of it"), "; "))
}

// drawNotesFile keeps a draw's notes beside its samples in the staging
// directory, so that a training resumed after an interrupt says what the
// uninterrupted one says; it is removed before the commit.
const drawNotesFile = ".draw-notes.json"

// savedNotes is DrawNotes as drawNotesFile holds them.
type savedNotes struct {
	Warnings []string         `json:"warnings"`
	Census   *sampling.Census `json:"census"`
}

func writeDrawNotes(path string, n DrawNotes) error {
	body, err := json.Marshal(savedNotes{Warnings: n.warnings, Census: n.census})
	if err != nil {
		return err
	}
	return atomicfs.WriteFile(path, body)
}

func readDrawNotes(path string) (savedNotes, error) {
	var n savedNotes
	body, err := os.ReadFile(path)
	if err != nil {
		return n, err
	}
	return n, json.Unmarshal(body, &n)
}
