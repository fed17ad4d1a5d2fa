package sampling

import "fmt"

// The values of a split plane (SplitPlane).
const (
	PlaneNone       = 0 // no label
	PlaneTrain      = 1 // a training pixel
	PlaneValidation = 2 // a validation pixel
	PlaneBuffer     = 3 // a training pixel the buffer keeps out
)

// SplitPlane marks every labelled pixel of an input (labels: its codes,
// width × height, 0 for none) with the split the draw gives it, by the
// same rule and the same seeded hashes: PlaneValidation in validation
// blocks, PlaneBuffer within cfg.Buffer of one, PlaneTrain elsewhere.
// input is the input's index in the job, as the draw numbers inputs (the
// order they are added). A model trained on PlaneTrain pixels and scored
// on PlaneValidation ones sees the forest's split pixel for pixel. Only
// the blocked split has a plane: a split by features needs the groups.
func SplitPlane(cfg Config, input int, labels []uint8, width, height int) ([]uint8, error) {
	if cfg.Split == SplitFeatures {
		return nil, fmt.Errorf("split plane: sampling.split features keeps groups apart, not blocks: use the blocked split")
	}
	if cfg.BlockSize < 1 || len(labels) != width*height {
		return nil, fmt.Errorf("split plane: block size %d, %d labels for %d×%d", cfg.BlockSize, len(labels), width, height)
	}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	rule := &drawRule{seed: cfg.Seed, input: uint64(input), block: cfg.BlockSize, buffer: cfg.Buffer, height: height, valFrac: cfg.ValidationFraction}
	nb := (width + cfg.BlockSize - 1) / cfg.BlockSize
	cur, prev, next := make([]uint16, nb), make([]uint16, nb), make([]uint16, nb)
	var b bufferRows
	out := make([]uint8, len(labels))
	for r := range height {
		if r%cfg.BlockSize == 0 {
			rule.splitsOf(r/cfg.BlockSize, cur)
			rule.neighbours(r/cfg.BlockSize, &b, cur, prev, next)
		}
		if rule.buffer > 0 {
			b.reach(r, height, rule.block, rule.buffer)
		}
		for col, code := range labels[r*width : (r+1)*width] {
			switch {
			case code == 0:
			case cur[col/cfg.BlockSize] == 1:
				out[r*width+col] = PlaneValidation
			case rule.buffer > 0 && b.near(col, rule.block, rule.buffer):
				out[r*width+col] = PlaneBuffer
			default:
				out[r*width+col] = PlaneTrain
			}
		}
	}
	return out, nil
}
