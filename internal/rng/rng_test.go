package rng

import "testing"

func TestStartExtendIsHash(t *testing.T) {
	t.Parallel()
	for seed := range uint64(5) {
		h := Start(seed)
		if h != Hash(seed) {
			t.Fatalf("Start(%d) differs from Hash", seed)
		}
		keys := []uint64{0x5a4, seed, 1<<40 + 3, 0, ^uint64(0)}
		for i, k := range keys {
			h = Extend(h, k)
			if want := Hash(seed, keys[:i+1]...); h != want {
				t.Fatalf("seed %d, %d keys: %x, Hash gives %x", seed, i+1, h, want)
			}
		}
		if Hash2(seed, 3, 4) != Extend(Extend(Start(seed), 3), 4) {
			t.Fatalf("Hash2 differs")
		}
	}
}
