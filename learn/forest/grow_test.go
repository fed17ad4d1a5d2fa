package forest

import (
	"context"
	"reflect"
	"testing"
)

// multi is a Grower for batches of trees built from one CPU grower per
// tree, as the GPU grower sees batches; handle h of tree t is h*64 + t.
type multi struct {
	gs []*cpuGrower
}

func (m *multi) Roots(trees []uint64) ([][]int64, []int, error) {
	var counts [][]int64
	var handles []int
	for t, id := range trees {
		c, h, err := m.gs[t].Roots([]uint64{id})
		if err != nil {
			return nil, nil, err
		}
		counts, handles = append(counts, c[0]), append(handles, h[0]*64+t)
	}
	return counts, handles, nil
}

func (m *multi) Splits(tasks []Task) ([]Split, error) {
	out := make([]Split, len(tasks))
	for k, t := range tasks {
		t.Handle /= 64
		out[k] = m.gs[t.Tree].split(t)
	}
	return out, nil
}

func (m *multi) Partition(tasks []Task, splits []Split) ([][2]int, error) {
	out := make([][2]int, len(tasks))
	for k, t := range tasks {
		tt := t
		tt.Handle /= 64
		ch, err := m.gs[t.Tree].Partition([]Task{tt}, splits[k:k+1])
		if err != nil {
			return nil, err
		}
		out[k] = [2]int{ch[0][0]*64 + t.Tree, ch[0][1]*64 + t.Tree}
	}
	return out, nil
}

// TestGrowBatch grows a batch of trees at once, as the GPU does, and
// checks it equals Train's tree-at-a-time forest.
func TestGrowBatch(t *testing.T) {
	t.Parallel()
	x, y := gaussians(6000, 7, 5, 1.0, 0.1, 4)
	p := Params{Trees: 9, MaxDepth: 14, MinSamplesLeaf: 2, Bins: 64, Bootstrap: true, Seed: 8}
	want, b := fit(t, x, y, 7, 5, p, 3)
	xb, _ := b.Bin(x, 7)
	m := &multi{}
	ids := make([]uint64, p.Trees)
	for k := range ids {
		ids[k] = uint64(k)
		m.gs = append(m.gs, newGrower(xb, y, 5, p))
	}
	trees, imp, err := Grow(context.Background(), m, ids, 5, 7, p)
	if err != nil {
		t.Fatal(err)
	}
	got := NewForest(5, 7, trees, imp)
	if !reflect.DeepEqual(got, want) {
		t.Fatal("a batch grown at once differs from trees grown one by one")
	}
}
