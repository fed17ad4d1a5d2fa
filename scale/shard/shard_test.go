package shard

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestResolve(t *testing.T) {
	cases := []struct {
		name  string
		flag  string
		count int
		env   func(string) string
		want  Spec
		ok    bool
		err   string
	}{
		{name: "nothing", env: env()},
		{name: "flag", flag: "2/5", env: env(), want: Spec{2, 5}, ok: true},
		{name: "slurm", env: env("SLURM_ARRAY_TASK_ID", "3", "SLURM_ARRAY_TASK_COUNT", "4"), want: Spec{3, 4}, ok: true},
		{name: "slurm from 1", env: env("SLURM_ARRAY_TASK_ID", "4", "SLURM_ARRAY_TASK_COUNT", "4", "SLURM_ARRAY_TASK_MIN", "1"), want: Spec{3, 4}, ok: true},
		{name: "kubernetes", count: 8, env: env("JOB_COMPLETION_INDEX", "7"), want: Spec{7, 8}, ok: true},
		{name: "kubernetes count from env", env: env("JOB_COMPLETION_INDEX", "0", "LULC_SHARD_COUNT", "3"), want: Spec{0, 3}, ok: true},
		{name: "aws batch", env: env("AWS_BATCH_JOB_ARRAY_INDEX", "1", "AWS_BATCH_JOB_ARRAY_SIZE", "2"), want: Spec{1, 2}, ok: true},
		{name: "coiled", count: 100, env: env("COILED_BATCH_TASK_ID", "99"), want: Spec{99, 100}, ok: true},
		{name: "flag agrees with engine", flag: "1/2", env: env("AWS_BATCH_JOB_ARRAY_INDEX", "1", "AWS_BATCH_JOB_ARRAY_SIZE", "2"), want: Spec{1, 2}, ok: true},

		{name: "two engines", env: env("SLURM_ARRAY_TASK_ID", "1", "SLURM_ARRAY_TASK_COUNT", "4", "JOB_COMPLETION_INDEX", "1"), err: "several array-job engines"},
		{name: "flag disagrees with engine", flag: "0/2", env: env("AWS_BATCH_JOB_ARRAY_INDEX", "1", "AWS_BATCH_JOB_ARRAY_SIZE", "2"), err: "disagree"},
		{name: "count flag disagrees with engine", count: 3, env: env("SLURM_ARRAY_TASK_ID", "1", "SLURM_ARRAY_TASK_COUNT", "4"), err: "disagree"},
		{name: "count flag disagrees with env", count: 3, env: env("JOB_COMPLETION_INDEX", "1", "LULC_SHARD_COUNT", "4"), err: "disagree"},
		{name: "kubernetes without count", env: env("JOB_COMPLETION_INDEX", "1"), err: "no task count"},
		{name: "index past count", env: env("SLURM_ARRAY_TASK_ID", "4", "SLURM_ARRAY_TASK_COUNT", "4"), err: "outside 0…3"},
		{name: "bad index", env: env("COILED_BATCH_TASK_ID", "x", "LULC_SHARD_COUNT", "4"), err: "not a task index"},
		{name: "bad count", env: env("LULC_SHARD_COUNT", "0"), err: "not a task count"},
		{name: "count without index", count: 4, env: env(), err: "no task index"},
		{name: "bad flag", flag: "3", env: env(), err: "not i/n"},
		{name: "flag index too big", flag: "5/5", env: env(), err: "outside 0…4"},
		{name: "flag count zero", flag: "0/0", env: env(), err: "below 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok, err := Resolve(c.flag, c.count, c.env)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one saying %q", err, c.err)
				}
				return
			}
			if err != nil || ok != c.ok || got != c.want {
				t.Fatalf("%v %v %v, want %v %v", got, ok, err, c.want, c.ok)
			}
		})
	}
}

// TestAssign checks that every tile goes to exactly one task, that the
// tasks' scene counts differ by at most the largest tile's, and that the
// assignment depends on the tiles alone, not on their order.
func TestAssign(t *testing.T) {
	var tiles []Tile
	for i := range 37 {
		tiles = append(tiles, Tile{Name: fmt.Sprintf("T%02d", i), Scenes: 1 + (i*7)%13})
	}
	for _, n := range []int{1, 2, 5, 37, 50} {
		got := Assign(tiles, n)
		rev := slices.Clone(tiles)
		slices.Reverse(rev)
		if fmt.Sprint(Assign(rev, n)) != fmt.Sprint(got) {
			t.Errorf("%d tasks: the assignment depends on the tiles' order", n)
		}
		seen := map[string]int{}
		lo, hi := 1<<30, 0
		for _, names := range got {
			load := 0
			for _, name := range names {
				seen[name]++
				for _, tl := range tiles {
					if tl.Name == name {
						load += tl.Scenes
					}
				}
			}
			lo, hi = min(lo, load), max(hi, load)
		}
		if len(seen) != len(tiles) {
			t.Errorf("%d tasks: %d of %d tiles assigned", n, len(seen), len(tiles))
		}
		for name, k := range seen {
			if k != 1 {
				t.Errorf("%d tasks: %s assigned %d times", n, name, k)
			}
		}
		if n <= len(tiles) && hi-lo > 13 {
			t.Errorf("%d tasks: loads from %d to %d scenes", n, lo, hi)
		}
	}
}
