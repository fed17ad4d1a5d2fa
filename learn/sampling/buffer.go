package sampling

// The buffered split (Config.Buffer): a pixel of a training block within
// Buffer pixels, in Chebyshev distance, of a pixel of a validation block
// is no candidate; the draw counts it as buffered. Blocks lie on the
// input's grid and only those that hold pixels of the input count (none
// beyond its edges). With Buffer < BlockSize a pixel's square reaches at
// most its block's eight neighbours: the block row above when the pixel
// is among its block's first Buffer rows, the one below when among its
// last Buffer rows (row%block ≥ block − Buffer), and likewise for
// columns; a diagonal neighbour counts when both its row and column do.
// Every path (strips, the passes on every core, a device's) tests exactly
// this; the tests check it against the plain definition, pixel by pixel.

// bufferRows are the splits of a block row (cur) and of the block rows
// above and below it (prev, next: nil where the input has none), and
// which of them a row of pixels reaches.
type bufferRows struct {
	prev, cur, next []uint16
	up, down        bool
}

// reach sets which neighbouring block rows row (of an input height rows
// high) lies within buffer of.
func (b *bufferRows) reach(row, height, block, buffer int) {
	dr, br := row%block, row/block
	b.up = dr < buffer && br > 0
	b.down = dr >= block-buffer && (br+1)*block < height
}

// near reports whether the pixel at column col lies within buffer of a
// validation block other than its own (cur's block count is the input's
// width in blocks).
func (b *bufferRows) near(col, block, buffer int) bool {
	c, dc := col/block, col%block
	left := dc < buffer && c > 0
	right := dc >= block-buffer && c+1 < len(b.cur)
	val := func(s []uint16) bool {
		return s[c] == 1 || left && s[c-1] == 1 || right && s[c+1] == 1
	}
	return left && b.cur[c-1] == 1 || right && b.cur[c+1] == 1 || b.up && val(b.prev) || b.down && val(b.next)
}
