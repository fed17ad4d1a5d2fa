// Package shard splits a job's tiles over the tasks of an array job: which
// task this process is (from --shard i/n or the variables that Slurm,
// Kubernetes, AWS Batch and Coiled set), and which tiles each task maps,
// deterministically and balanced by the tiles' scene counts.
package shard

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Spec is one task of n: Index in [0, Count).
type Spec struct {
	Index, Count int
}

func (s Spec) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// Parse reads "i/n".
func Parse(text string) (Spec, error) {
	i, n, ok := strings.Cut(text, "/")
	if !ok {
		return Spec{}, fmt.Errorf("shard %q: not i/n", text)
	}
	var s Spec
	var err1, err2 error
	s.Index, err1 = strconv.Atoi(i)
	s.Count, err2 = strconv.Atoi(n)
	if err1 != nil || err2 != nil {
		return Spec{}, fmt.Errorf("shard %q: not i/n with whole numbers", text)
	}
	return s, s.check(fmt.Sprintf("shard %q", text))
}

func (s Spec) check(what string) error {
	switch {
	case s.Count < 1:
		return fmt.Errorf("%s: the count %d is below 1", what, s.Count)
	case s.Index < 0 || s.Index >= s.Count:
		return fmt.Errorf("%s: the index %d is outside 0…%d", what, s.Index, s.Count-1)
	}
	return nil
}

// scheduler is an array-job system's variables: its task index, and its task
// count where it exports one.
type scheduler struct {
	name, index, count string
}

// schedulers are the array-job systems whose variables Resolve reads.
var schedulers = []scheduler{
	{"Slurm", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT"},
	{"Kubernetes", "JOB_COMPLETION_INDEX", ""},
	{"AWS Batch", "AWS_BATCH_JOB_ARRAY_INDEX", "AWS_BATCH_JOB_ARRAY_SIZE"},
	{"Coiled", "COILED_BATCH_TASK_ID", ""},
}

// CountVar is the variable that gives the task count where the scheduler
// exports none (as --shard-count does).
const CountVar = "LULC_SHARD_COUNT"

// Resolve decides which task this process is: flag ("i/n", may be empty)
// and count (--shard-count, 0 when not given) from the command line, else
// the schedulers' variables read through getenv. ok is false when nothing
// asks for sharding. Several schedulers' variables set at once, or values
// that disagree (with each other, with the flags, or with CountVar), are
// errors, since a task that guesses its index maps the wrong tiles.
//
// Slurm numbers array tasks from the array's first index (--array=1-4
// gives 1…4): lulc takes SLURM_ARRAY_TASK_ID minus SLURM_ARRAY_TASK_MIN
// when Slurm exports it.
func Resolve(flag string, count int, getenv func(string) string) (s Spec, ok bool, err error) {
	if count < 0 {
		return Spec{}, false, fmt.Errorf("--shard-count %d is negative", count)
	}
	if v := getenv(CountVar); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return Spec{}, false, fmt.Errorf("%s=%q is not a task count", CountVar, v)
		}
		if count > 0 && count != n {
			return Spec{}, false, fmt.Errorf("--shard-count %d and %s=%d disagree", count, CountVar, n)
		}
		count = n
	}
	var set []string
	for _, e := range schedulers {
		if getenv(e.index) != "" {
			set = append(set, e.index)
		}
	}
	if len(set) > 1 {
		return Spec{}, false, fmt.Errorf("the variables of several array-job engines are set (%s): lulc cannot tell which one runs it; unset all but one", strings.Join(set, ", "))
	}
	env := Spec{Index: -1}
	for _, e := range schedulers {
		v := getenv(e.index)
		if v == "" {
			continue
		}
		i, err := strconv.Atoi(v)
		if err != nil || i < 0 {
			return Spec{}, false, fmt.Errorf("%s=%q is not a task index", e.index, v)
		}
		if e.name == "Slurm" {
			if m := getenv("SLURM_ARRAY_TASK_MIN"); m != "" {
				lo, err := strconv.Atoi(m)
				if err != nil || lo > i {
					return Spec{}, false, fmt.Errorf("SLURM_ARRAY_TASK_MIN=%q does not fit SLURM_ARRAY_TASK_ID=%d", m, i)
				}
				i -= lo
			}
		}
		n := count
		if e.count != "" && getenv(e.count) != "" {
			c, err := strconv.Atoi(getenv(e.count))
			if err != nil || c < 1 {
				return Spec{}, false, fmt.Errorf("%s=%q is not a task count", e.count, getenv(e.count))
			}
			if count > 0 && c != count {
				return Spec{}, false, fmt.Errorf("%s=%d and the task count %d (--shard-count or %s) disagree", e.count, c, count, CountVar)
			}
			n = c
		}
		if n == 0 {
			return Spec{}, false, fmt.Errorf("%s is set but no task count is known: give --shard-count or %s", e.index, CountVar)
		}
		env = Spec{Index: i, Count: n}
	}
	if flag != "" {
		s, err := Parse(flag)
		if err != nil {
			return Spec{}, false, err
		}
		if count > 0 && s.Count != count {
			return Spec{}, false, fmt.Errorf("--shard %s and the task count %d disagree", s, count)
		}
		if env.Index >= 0 && env != s {
			return Spec{}, false, fmt.Errorf("--shard %s and %s (task %s) disagree", s, set[0], env)
		}
		return s, true, nil
	}
	if env.Index < 0 {
		if count > 0 {
			return Spec{}, false, errors.New("a task count is given but no task index: give --shard i/n or run as an array task")
		}
		return Spec{}, false, nil
	}
	return env, true, env.check(set[0])
}

// Tile is what assignment needs to know of a tile.
type Tile struct {
	Name   string
	Scenes int // the tile's scenes (dates): its cost
}

// Assign shares the tiles out over count tasks, balanced by scene count:
// tiles in order of decreasing scenes (then name) each go to the task with
// the fewest scenes so far (then the lowest index). It depends only on
// the tiles' names and scene counts, so every task computes the same
// assignment. Each task's tiles are returned sorted by name.
func Assign(tiles []Tile, count int) [][]string {
	order := slices.Clone(tiles)
	slices.SortFunc(order, func(a, b Tile) int {
		if a.Scenes != b.Scenes {
			return b.Scenes - a.Scenes
		}
		return strings.Compare(a.Name, b.Name)
	})
	out := make([][]string, count)
	load := make([]int, count)
	for _, t := range order {
		k := 0
		for j := range count {
			if load[j] < load[k] {
				k = j
			}
		}
		out[k] = append(out[k], t.Name)
		// A tile of no scene still costs its share of reading labels.
		load[k] += max(1, t.Scenes)
	}
	for k := range out {
		slices.Sort(out[k])
	}
	return out
}
