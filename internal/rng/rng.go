// Package rng is lulc's counter-based randomness: a value is a hash of a
// seed and of what it belongs to (a tree, a node, a pixel, a draw), never a
// draw from a shared stream, so results do not depend on threads or order.
// The GPU twins use the same functions.
package rng

// Mix is the splitmix64 finaliser.
func Mix(z uint64) uint64 {
	z ^= z >> 30
	z *= 0xbf58476d1ce4e5b9
	z ^= z >> 27
	z *= 0x94d049bb133111eb
	z ^= z >> 31
	return z
}

// golden is 2^64 / φ, splitmix64's increment.
const golden = 0x9e3779b97f4a7c15

// Hash combines a seed with keys.
func Hash(seed uint64, keys ...uint64) uint64 {
	h := Mix(seed + golden)
	for _, k := range keys {
		h = Mix(h ^ (k + golden))
	}
	return h
}

// Start and Extend compute Hash one key at a time:
// Extend(Extend(Start(seed), a), b) == Hash(seed, a, b). A loop over pixels
// hashes the keys its pixels share (seed, input, row) once and extends
// that by each pixel's own.
func Start(seed uint64) uint64 { return Mix(seed + golden) }

// Extend adds a key to a hash begun by Start.
func Extend(h, k uint64) uint64 { return Mix(h ^ (k + golden)) }

// Hash2 is Hash(seed, a, b) without the variadic slice, for inner loops.
func Hash2(seed, a, b uint64) uint64 {
	return Mix(Mix(Mix(seed+golden)^(a+golden)) ^ (b + golden))
}

// Unit maps a hash to [0, 1).
func Unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }
