package classifier

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/device/cuda/driver"
	"github.com/lulc/lulc/pixel/features"
)

// contextPlan is how a feature set's context features are computed on the
// device: the distinct per-pixel features they summarise (their bases), as
// programs of the features kernels, and per (base, window) pair the
// feature planes its mean, standard deviation and range go to.
type contextPlan struct {
	baseCodes []int32 // 5 per base: the operation and its input bands
	base      driver.Buffer
	pairs     []contextPair
	fused     []fusedBase // per base
	// The programs of features_context, uploaded on first use: per base 4
	// ints (its largest radius, -1 for a base left to the two-pass
	// kernels; whether it keeps values for a range; where its windows
	// start in pairProg, and how many), and each base's windows.
	baseProg, pairProg []int32
	baseDev, pairDev   driver.Buffer
	// shared is features_context's dynamic shared memory for the bases
	// it takes; twoPass says whether some base is left to context_rows and
	// context_cols.
	shared  int
	twoPass bool
}

// fusedBase is one base's windows as features_context takes them (prog:
// 4 ints a window), their largest radius, whether one wants a range
// (values 1), and the shared memory that takes: above maxShared the
// base's windows take the two-pass kernels instead.
type fusedBase struct {
	prog   []int32
	R      int
	values int32
	shared int
}

// fits reports whether features_context can take the base.
func (f *fusedBase) fits() bool { return f.shared <= maxShared }

// contextPair is one base feature over one window radius: the statistics
// that context_cols writes, as feature indices (-1: not in the set).
type contextPair struct {
	base, r        int
	mean, std, rng int32
}

// newContextPlan groups the set's context features by base and window.
// Inputs are addressed by their slot among the planes the device gets.
func newContextPlan(set *features.Set, slot map[int]int32) (contextPlan, error) {
	var plan contextPlan
	bases := map[string]int{}
	pairs := map[[2]int]int{}
	for _, fi := range set.ContextFeatures() {
		f := set.Features[fi]
		b, ok := bases[f.Base.Name]
		if !ok {
			op, ok := cuda.FeatureOp(f.Base.Op)
			if !ok {
				return plan, fmt.Errorf("cuda: feature %s has no GPU operation %q", f.Base.Name, f.Base.Op)
			}
			p := [5]int32{op, 0, 0, 0, 0}
			for k, pos := range set.Inputs(fi) {
				p[1+k] = slot[pos]
			}
			b = len(bases)
			bases[f.Base.Name] = b
			plan.baseCodes = append(plan.baseCodes, p[:]...)
		}
		key := [2]int{b, f.Size / 2}
		k, ok := pairs[key]
		if !ok {
			k = len(plan.pairs)
			pairs[key] = k
			plan.pairs = append(plan.pairs, contextPair{base: b, r: f.Size / 2, mean: -1, std: -1, rng: -1})
		}
		switch f.Stat {
		case "mean":
			plan.pairs[k].mean = int32(fi)
		case "std":
			plan.pairs[k].std = int32(fi)
		default:
			plan.pairs[k].rng = int32(fi)
		}
	}
	for b := range plan.bases() {
		prog, R, values := plan.fusedProgram(b)
		fb := fusedBase{prog: prog, R: R, values: values, shared: contextShared(R, values)}
		plan.fused = append(plan.fused, fb)
		if !fb.fits() {
			plan.twoPass = true
			plan.baseProg = append(plan.baseProg, -1, 0, 0, 0)
			continue
		}
		plan.baseProg = append(plan.baseProg, int32(R), values, int32(len(plan.pairProg)), int32(len(prog)/4))
		plan.pairProg = append(plan.pairProg, prog...)
		plan.shared = max(plan.shared, fb.shared)
	}
	return plan, nil
}

// chunk is how many pixels features_context stages at once for the
// per-pixel features (nb reflectances each, in shared memory):
// contextPixels a thread where they fit, else at most one a thread.
// shared is the shared memory the kernel then takes.
func (c *contextPlan) chunk(nb int) (chunk, shared int) {
	chunk = contextPixels * 256
	if nb*chunk*4 > maxShared {
		chunk = min(256, maxShared/(4*nb)/32*32)
	}
	return chunk, max(c.shared, nb*chunk*4)
}

// bases is the number of distinct base features.
func (c *contextPlan) bases() int { return len(c.baseCodes) / 5 }

// PredictDNContext is PredictDN for a feature set with context features:
// b holds the band planes of a block with its halo (b.Rect, as
// features.Halo gives it), and cls and conf receive the inner rectangle's
// classes and confidences. On the device: the window's features in one
// pass from its DNs (features_context, see contextPass), then the bin
// codes and the forest walk. The bits are the CPU's: features.Set's
// ContextCompute and CPU.Compute, then Predict.
func (p *Predictor) PredictDNContext(fe *Features, b features.DN, cls []uint8, conf []float32) error {
	return p.predictDNContext(fe, b, cls, conf, nil, nil, nil, nil)
}

// PredictDNContextDI is PredictDNContext that also measures the
// dissimilarity index of some of the window's pixels from the same
// features (AOA.DIFromDN's: pixels index the inner rectangle, ascending,
// and di receives theirs): the block's DNs go up once and its features
// are computed once, for the forest and the area of applicability alike.
// a must live on the predictor's device.
func (p *Predictor) PredictDNContextDI(fe *Features, b features.DN, cls []uint8, conf []float32, a *AOA, pixels []int32, di []float32) error {
	if err := p.checkAOA(fe, b.Rect, a, pixels, di); err != nil {
		return err
	}
	return p.predictDNContext(fe, b, cls, conf, a, pixels, di, nil)
}

// checkAOA checks that a measures fe's features on the predictor's
// device, and pixels (di's) index rect's inner window in order.
func (p *Predictor) checkAOA(fe *Features, rect features.Rect, a *AOA, pixels []int32, di []float32) error {
	if a == nil || a.Dev != p.Dev {
		return errors.New("cuda predict: no area of applicability on the predictor's device")
	}
	if nf := a.ref.Features(); nf != len(fe.Set.Features) {
		return fmt.Errorf("cuda predict: an area of applicability of %d features for %d", nf, len(fe.Set.Features))
	}
	return checkPixels(pixels, rect.InnerW*rect.InnerH, len(di))
}

// MirrorBlock is a context window read from the device's own copy of its
// tile (a cuda.Mirror, which the composite fills as it goes): the block
// with its halo lies at column X and row Y of the tile, and Valid
// receives the inner window's validity (true where every band of the set
// holds data), which the host, holding none of the block's DNs, cannot
// work out itself.
type MirrorBlock struct {
	Mirror *cuda.Mirror
	X, Y   int
	Valid  []bool
}

// PredictMirrorContextDI is PredictDNContext (with an area of
// applicability, as PredictDNContextDI, when a is not nil) for a block
// that the device holds already: mb's place in its mirror and b's Rect
// say where (b's planes are not read), and nothing of it crosses the
// bus. The bits are those of PredictDNContextDI given the same block's
// DNs. The rows the block reads must be placed in the mirror (the
// composite's copy of them to the host has ended).
func (p *Predictor) PredictMirrorContextDI(fe *Features, mb MirrorBlock, b features.DN, cls []uint8, conf []float32, a *AOA, pixels []int32, di []float32) error {
	m := mb.Mirror
	if m == nil || m.Device() != p.Dev {
		return errors.New("cuda predict: no mirror of the tile on the predictor's device")
	}
	if nb := len(fe.Set.Bands); nb > m.Bands() || len(fe.Set.Features) != p.nf {
		return fmt.Errorf("cuda predict: a set of %d bands from a mirror of %d, %d features for a model of %d", nb, m.Bands(), len(fe.Set.Features), p.nf)
	}
	if len(mb.Valid) != b.Rect.InnerW*b.Rect.InnerH {
		return fmt.Errorf("cuda predict: %d validities for a %d × %d window", len(mb.Valid), b.Rect.InnerW, b.Rect.InnerH)
	}
	if a != nil {
		if err := p.checkAOA(fe, b.Rect, a, pixels, di); err != nil {
			return err
		}
	}
	return p.predictDNContext(fe, b, cls, conf, a, pixels, di, &mb)
}

// predictDNContext predicts a context window from b's planes, or, with
// mb, from the block the device's mirror holds.
func (p *Predictor) predictDNContext(fe *Features, b features.DN, cls []uint8, conf []float32, a *AOA, pixels []int32, di []float32, mb *MirrorBlock) error {
	rect := b.Rect
	// The planes the features read: b's, or the mirror's.
	nb := len(fe.used)
	var dn [][]uint16
	if mb == nil {
		var err error
		if dn, err = p.dnPlanes(fe, b.Planes); err != nil {
			return err
		}
	}
	plan := &fe.ctx
	if plan.bases() == 0 {
		return fmt.Errorf("cuda predict: a feature set without context features")
	}
	w, h, iw, ih := rect.Width, rect.Height, rect.InnerW, rect.InnerH
	if rect.X < 0 || rect.Y < 0 || rect.X+iw > w || rect.Y+ih > h {
		return fmt.Errorf("cuda predict: inner block %+v outside its halo", rect)
	}
	n, ph := iw*ih, w*h
	if len(cls) != n || len(conf) != n {
		return fmt.Errorf("cuda predict: %d classes and %d confidences for %d pixels", len(cls), len(conf), n)
	}
	for _, b := range dn {
		if len(b) != ph {
			return fmt.Errorf("cuda predict: band planes of %d pixels for a block of %d", len(b), ph)
		}
	}
	if n == 0 {
		return nil
	}
	if len(pixels) == 0 {
		a = nil
	}
	// The block's DNs go up into a buffer of their own beside the owner,
	// which meanwhile runs other windows' passes (with OwnerCopies, on the
	// owner, as before).
	blk := <-p.blocks
	defer func() { p.blocks <- blk }()
	opt := p.Dev.Options()
	if need := uint64(ph*nb) * 2; blk.Bytes < need {
		if err := p.Dev.Do(func() (err error) {
			if blk.Ptr != 0 {
				blk.Free()
				*blk = driver.Buffer{}
			}
			*blk, err = driver.Alloc(need)
			return err
		}); err != nil {
			return fmt.Errorf("cuda predict: a block of %d DNs: %w", ph*nb, err)
		}
	}
	if !opt.OwnerCopies && mb == nil {
		for b, plane := range dn {
			if err := p.Dev.CopyAside(blk.Ptr+uint64(b*ph*2), unsafe.Slice((*byte)(unsafe.Pointer(&plane[0])), 2*ph), opt.Pageable); err != nil {
				return fmt.Errorf("cuda predict: a block's DNs: %w", err)
			}
		}
	}
	// One window at a time: its kernels use the predictor's first slot
	// and AOA buffers, and it waits for them beside the owner, which
	// meanwhile queues other work (the next tile's composite).
	p.window.Lock()
	defer p.window.Unlock()
	var s uintptr
	held := false // waited for on the owner
	if err := p.Dev.Do(func() (err error) {
		if err := p.reserve(n, false); err != nil {
			return fmt.Errorf("cuda predict: %d pixels: %w", n, err)
		}
		if mb != nil {
			if err := p.reserveValid(n); err != nil {
				return fmt.Errorf("cuda predict: %d pixels' validity: %w", n, err)
			}
		}
		if a != nil {
			if err := p.reserveAOA(len(pixels)); err != nil {
				return fmt.Errorf("cuda predict: %d AOA pixels: %w", len(pixels), err)
			}
		}
		// What went up by the null stream (the model's and the set's
		// buffers, on first use; the DNs with OwnerCopies) must be on
		// the device before s runs: only then does the pass wait for the
		// null stream, which otherwise holds other work (the next tile's
		// composite) that this window need not wait for.
		wait := opt.WaitAll || opt.OwnerCopies || !p.settled[fe] || a != nil && !p.settled[a]
		prog, err := fe.program()
		if err != nil {
			return err
		}
		s = p.streams[0]
		defer func() {
			if err != nil {
				// Kernels queued on s may still read the block, which
				// goes back to other windows once this returns.
				driver.SyncStream(s)
			}
		}()
		var best uint64
		if a != nil {
			// With WaitAll the pixels and the memset go by the null
			// stream, as before, which the pass then waits for.
			ps := s
			if opt.WaitAll {
				ps = 0
			}
			if err := driver.PutOn(p.aoaIdx.Ptr, pixels, ps); err != nil {
				return err
			}
			best = p.aoaBest.Ptr
			if err := a.begin(ps, best, int64(len(pixels))); err != nil {
				return err
			}
		}
		if mb != nil {
			// The block and the window's validity from the mirror, by
			// s: the composite placed these rows before the host had
			// them, so s need wait for nothing.
			if err := mb.Mirror.Block(s, blk.Ptr, fe.used, mb.X, mb.Y, w, h); err != nil {
				return err
			}
			if err := mb.Mirror.Valid(s, p.dValid.Ptr, len(fe.Set.Bands), mb.X+rect.X, mb.Y+rect.Y, iw, ih); err != nil {
				return err
			}
			if err := driver.CopyToHostAsync(p.hostValid, p.dValid.Ptr, uint64(n), s); err != nil {
				return err
			}
		} else if opt.OwnerCopies {
			for b, plane := range dn {
				if err := driver.PutAt(blk.Ptr+uint64(b*ph*2), plane); err != nil {
					return err
				}
			}
		}
		if err := fe.contextPass(s, blk.Ptr, b, prog, p.dIn[0].Ptr, wait); err != nil {
			return err
		}
		if p.settled == nil {
			p.settled = map[any]bool{}
		}
		p.settled[fe] = true
		if a != nil {
			p.settled[a] = true
			if err := a.queue(s, p.dIn[0].Ptr, int64(n), p.aoaIdx.Ptr, int64(len(pixels)), best, p.aoaOut.Ptr); err != nil {
				return err
			}
		}
		if err := p.walk(0, n); err != nil {
			return err
		}
		if a != nil {
			if err := driver.CopyToHostAsync(p.hostDI, p.aoaOut.Ptr, uint64(len(pixels))*4, s); err != nil {
				return err
			}
		}
		// The two-pass bases use buffers of the device's pool, which
		// other work may take once the owner is free: wait here then,
		// as with WaitAll, which restores the old waits.
		if opt.WaitAll || fe.ctx.twoPass {
			held = true
			return driver.SyncStream(s)
		}
		return nil
	}); err != nil {
		return err
	}
	if !held {
		if err := p.Dev.Beside(func() error { return driver.SyncStream(s) }); err != nil {
			return fmt.Errorf("cuda predict: a window's pass: %w", err)
		}
	}
	copy(cls, unsafe.Slice((*uint8)(p.hostCls[0]), n))
	copy(conf, unsafe.Slice((*float32)(p.hostConf[0]), n))
	if mb != nil {
		// mirror_valid writes bytes of 0 and 1, a Go bool's two values: a
		// plain copy, since the next window's pass waits on this lock.
		copy(unsafe.Slice((*uint8)(unsafe.Pointer(&mb.Valid[0])), n), unsafe.Slice((*uint8)(p.hostValid), n))
	}
	if a != nil {
		copy(di, unsafe.Slice((*float32)(p.hostDI), len(pixels)))
	}
	return nil
}

// contextPass queues on stream s, from a block's DN planes on the device
// (dn, b.Rect's size; b's own planes are not read), the window's features
// into out (the set's planes of b.Rect's inner pixels), in one kernel (features_context): each 32² tile
// of inner pixels computes its bases' values with their halo from the DNs
// in shared memory, their window sums there, and its per-pixel features,
// so that the DNs are read and the feature planes written and nothing
// else crosses device memory. A base whose windows would not fit in
// shared memory (a 31-px window with a range) takes two passes through
// device memory instead: reflectance and the base values of the whole
// block, then context_rows and context_cols (owner goroutine).
func (fe *Features) contextPass(s uintptr, dn uint64, b features.DN, prog, out uint64, wait bool) error {
	rect, nodata, scale, offset := b.Rect, b.NoData, b.Scale, b.Offset
	plan := &fe.ctx
	nb, nf := len(fe.used), len(fe.Set.Features)
	chunk, shared := plan.chunk(nb)
	if chunk < 32 {
		return fmt.Errorf("cuda features: %d band planes, too many to stage", nb)
	}
	// features_context addresses the DNs with 32-bit offsets.
	if uint64(nb)*uint64(rect.Width)*uint64(rect.Height) >= 1<<32 {
		return fmt.Errorf("cuda features: a %d x %d block of %d band planes is too large for one pass (4 Gi values at most)", rect.Width, rect.Height, nb)
	}
	// The programs, uploaded on first use.
	for _, u := range []struct {
		b    *driver.Buffer
		prog []int32
	}{{&plan.base, plan.baseCodes}, {&plan.baseDev, plan.baseProg}, {&plan.pairDev, plan.pairProg}} {
		if u.b.Ptr == 0 && len(u.prog) > 0 {
			var err error
			if *u.b, err = driver.Upload(u.prog); err != nil {
				return err
			}
			wait = true
		}
	}
	w, h, iw, ih := rect.Width, rect.Height, rect.InnerW, rect.InnerH
	// Copies from pageable memory by the null stream (the caller's DNs
	// with wait, the programs on first use) may still be on their way
	// when the driver returns, and a non-blocking stream s does not wait
	// for them: then wait here for the null stream (not for the whole
	// device: the copier's stream may be filling another window's block
	// meanwhile).
	if wait {
		if err := driver.SyncStream(0); err != nil {
			return err
		}
	}
	if plan.twoPass {
		if err := fe.contextTwoPass(s, dn, rect, nodata, scale, offset, out); err != nil {
			return err
		}
	}
	gx, gy := uint32((iw+contextTile-1)/contextTile), uint32((ih+contextTile-1)/contextTile)
	if err := fe.Dev.LaunchGrid(s, "features_context", [3]uint32{uint32(plan.bases() + 1), gx, gy}, 256, uint32(shared), dn, int32(nb), int32(w), int32(h),
		int32(rect.X), int32(rect.Y), int32(iw), int32(ih), int32(nodata), scale, offset, plan.base.Ptr, int32(plan.bases()),
		plan.baseDev.Ptr, plan.pairDev.Ptr, prog, int32(nf), int32(chunk), out, int64(iw*ih)); err != nil {
		return err
	}
	// Context features of layers were computed on the layers' plane
	// values: map them to the layers' units (features.Affine).
	n := int64(iw * ih)
	for _, fi := range fe.Set.ContextFeatures() {
		if m := fe.Set.Features[fi].Map; m != nil {
			if err := fe.Dev.LaunchAsync(s, "affine_plane", n, out+uint64(int64(fi)*n*4), n, m.Scale, m.Offset); err != nil {
				return err
			}
		}
	}
	return nil
}

// contextTwoPass queues the windows of the bases features_context leaves
// (see contextPass): reflectance and base values of the whole block, then
// per window the row sums (context_rows) and the column sums
// (context_cols) through device memory, into their feature planes of out.
func (fe *Features) contextTwoPass(s uintptr, dn uint64, rect features.Rect, nodata uint16, scale, offset float32, out uint64) error {
	plan := &fe.ctx
	nb := len(fe.used)
	w, h, iw, ih := rect.Width, rect.Height, rect.InnerW, rect.InnerH
	n, ph := iw*ih, w*h
	m := fe.Dev.Pool()
	var st driver.Staging
	nbase, rows := plan.bases(), uint64(h*iw)
	dRefl := st.Buf(m.Get("context.refl", uint64(ph*nb)*4))
	dBase := st.Buf(m.Get("context.base", uint64(ph*nbase)*4))
	dS := st.Buf(m.Get("context.s", rows*8))
	dSQ := st.Buf(m.Get("context.sq", rows*8))
	dCnt := st.Buf(m.Get("context.count", rows*4))
	dLo := st.Buf(m.Get("context.lo", rows*4))
	dHi := st.Buf(m.Get("context.hi", rows*4))
	if st.Err != nil {
		return st.Err
	}
	launch := func(name string, threads int, args ...any) error {
		return fe.Dev.LaunchAsync(s, name, int64(threads), args...)
	}
	if err := launch("reflectance", ph*nb, dn, int64(ph*nb), int32(nodata), scale, offset, dRefl.Ptr); err != nil {
		return err
	}
	if err := launch(fe.kernel(), ph, dRefl.Ptr, int32(nb), int64(ph), plan.base.Ptr, int32(nbase), dBase.Ptr); err != nil {
		return err
	}
	for _, pr := range plan.pairs {
		if plan.fused[pr.base].fits() {
			continue
		}
		v := dBase.Ptr + uint64(pr.base*ph*4)
		extremes := int32(0)
		if pr.rng >= 0 {
			extremes = 1
		}
		if err := launch("context_rows", int(rows), v, int32(w), int32(h), int32(rect.X), int32(iw), int32(pr.r), extremes,
			dS.Ptr, dSQ.Ptr, dCnt.Ptr, dLo.Ptr, dHi.Ptr); err != nil {
			return err
		}
		// context_cols: a thread per column and segment of 8 rows
		// (CONTEXT_SEG).
		if err := launch("context_cols", (ih+7)/8*iw, dS.Ptr, dSQ.Ptr, dCnt.Ptr, dLo.Ptr, dHi.Ptr, int32(h), int32(rect.Y), int32(ih), int32(iw), int32(pr.r),
			out, int64(n), pr.mean, pr.std, pr.rng); err != nil {
			return err
		}
	}
	return nil
}

// contextTile is features_context's tile side (CONTEXT_TILE), maxShared the
// dynamic shared memory a block may take without opting in: 48 KiB less
// the kernel's static per-pixel program (5 ints and a plane's 64-bit
// offset for each of up to 64 features, and their count, aligned).
const (
	contextTile = 32
	maxShared   = 48<<10 - (5*64*4 + 64*8 + 16)
)

// contextPixels is how many pixels a thread of features_context takes at
// once for the per-pixel features (CONTEXT_PIXELS).
const contextPixels = 4

// contextShared is features_context's shared memory for a largest radius R:
// the quantised values and, with a range (values 1), the values (side
// rows, an odd number of words apart), then the row results of its
// largest window (rows of contextTile+1: a sum, and the count with the
// sum of squares in one 64-bit integer, 12 bytes; a range's row extremes
// take their place).
func contextShared(R int, values int32) int {
	side, rows := contextTile+2*R, contextTile+2*R
	return (side*(side|1)*(1+int(values))+1)/2*8 + rows*(contextTile+1)*(8+4)
}

// fusedProgram is base b's windows as features_context takes them: 4 ints
// each (radius, mean, std and range planes), the largest radius, and
// whether any window wants a range (its values kept in shared memory).
func (c *contextPlan) fusedProgram(b int) (prog []int32, R int, values int32) {
	for _, pr := range c.pairs {
		if pr.base != b {
			continue
		}
		prog = append(prog, int32(pr.r), pr.mean, pr.std, pr.rng)
		R = max(R, pr.r)
		if pr.rng >= 0 {
			values = 1
		}
	}
	return prog, R, values
}
