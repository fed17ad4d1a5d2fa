package sampling

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/lulc/lulc/learn/sampleset"
)

// TestShardDrawsMerge checks that shards drawing disjoint inputs of a job
// (from memory and strip by strip), written and read back as draws and
// merged in any order, give the samples and warnings of one sampler
// adding every input.
func TestShardDrawsMerge(t *testing.T) {
	t.Parallel()
	merged := 0
	for trial := range uint64(24) {
		c := randomDrawCase(t, 500+trial, trial%6 == 5)
		if len(c.ins) < 2 {
			continue
		}
		want, wantWarn := drawSamples(t, c, c.ins)
		strips := stripInputs(c.ins)
		// Two shards: odd and even inputs, one of them read strip by strip.
		var draws []*sampleset.Set
		for shard := range 2 {
			sp := New(c.cfg, c.names, c.scheme, cpu)
			for i, in := range c.ins {
				if i%2 != shard {
					continue
				}
				if shard == 1 {
					in = strips[i]
				}
				if err := sp.AddAt(in, i); err != nil {
					t.Fatal(err)
				}
			}
			// The scale is metadata here; JSON has no infinity.
			scale := c.ins[0].Scale
			if math.IsInf(scale, 0) {
				scale = 0
			}
			d, err := sp.Draw(len(c.ins), scale, c.ins[0].Offset, c.ins[0].NoData)
			if err != nil {
				t.Fatal(err)
			}
			body, err := d.Encode()
			if err != nil {
				t.Fatal(err)
			}
			back, err := sampleset.Decode(body)
			if err != nil {
				t.Fatal(err)
			}
			draws = append(draws, back)
		}
		if trial%2 == 1 {
			slices.Reverse(draws)
		}
		sp := New(c.cfg, c.names, c.scheme, cpu)
		for _, d := range draws {
			if err := sp.Merge(d); err != nil {
				t.Fatal(err)
			}
		}
		set, _, err := sp.Finish()
		if err != nil {
			t.Fatal(err)
		}
		got, _ := set.Encode()
		if !bytes.Equal(got, want) {
			t.Errorf("trial %d: merged draws differ from one process's samples", trial)
		}
		if !slices.Equal(sp.Warnings(), wantWarn) {
			t.Errorf("trial %d: warnings %q, one process's %q", trial, sp.Warnings(), wantWarn)
		}
		merged++

		// A shard missing, or given twice, is refused.
		sp = New(c.cfg, c.names, c.scheme, cpu)
		if err := sp.Merge(draws[0]); err != nil {
			t.Fatal(err)
		}
		if err := sp.Merge(draws[0]); err == nil || !strings.Contains(err.Error(), "already drawn") {
			t.Errorf("trial %d: a draw merged twice gave %v", trial, err)
		}
		if _, _, err := sp.Finish(); err == nil || !strings.Contains(err.Error(), "missing") {
			t.Errorf("trial %d: a missing shard gave %v", trial, err)
		}
	}
	if merged < 10 {
		t.Fatalf("only %d trials had several inputs", merged)
	}
}
