package classifier

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/pixel/composite"
	"github.com/lulc/lulc/pixel/features"
)

// gpu opens GPU 0, skipping without one unless LULC_REQUIRE_GPU=1, with
// the kernels of the PTX file LULC_PTX names when set (the GPU host's
// reports time a candidate against the committed ones that way).
func gpu(t testing.TB) *cuda.Device {
	return gpuWith(t, cuda.Options{})
}

// gpuWith is gpu with opt (its PTX from LULC_PTX when unset).
func gpuWith(t testing.TB, opt cuda.Options) *cuda.Device {
	t.Helper()
	if p := os.Getenv("LULC_PTX"); p != "" && opt.PTX == "" {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("LULC_PTX: %v", err)
		}
		opt.PTX = string(b)
	}
	d, err := cuda.Open(0, opt)
	if err != nil {
		if os.Getenv("LULC_REQUIRE_GPU") == "1" {
			t.Fatalf("LULC_REQUIRE_GPU=1 but no usable GPU: %v", err)
		}
		t.Skipf("no usable GPU: %v", err)
	}
	return d
}

// ptxVersion returns the PTX ISA version of the kernels d loaded.
func ptxVersion(d *cuda.Device) string {
	src := d.Options().PTX
	if src == "" {
		src = cuda.PTX()
	}
	m := regexp.MustCompile(`(?m)^\.version\s+(\d+)\.(\d+)`).FindStringSubmatch(src)
	if m == nil {
		return "none"
	}
	return m[1] + "." + m[2]
}

// hard values: NaN, zeros of both signs, denormals, exact opposites
// (zero denominators), huge and tiny magnitudes.
var hard = []float32{float32(math.NaN()), 0, float32(math.Copysign(0, -1)), 1e-40, -1e-40, 0.5, -0.5, 3e38, -3e38, 1e-30, 0.1, -0.1}

func randomPlanes(r *rand.Rand, planes, n int) [][]float32 {
	out := make([][]float32, planes)
	for p := range out {
		out[p] = make([]float32, n)
		for i := range out[p] {
			switch r.IntN(20) {
			case 0:
				out[p][i] = hard[r.IntN(len(hard))]
			case 1:
				out[p][i] = float32(math.NaN())
			default:
				out[p][i] = float32(r.Float64()*1.3 - 0.1)
			}
		}
	}
	return out
}

func sameBits(a, b []float32) int {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

func TestFeaturesBitExact(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	// 18 stack planes. The narrow set reads 12 of them: only those go to
	// the device, into the features kernel (16 at most); the wide set
	// reads all 18, which takes features_wide.
	bands := []string{"B02", "B03", "B04", "B08", "B05", "B06", "B07", "B8A", "B11", "B12", "p10(ndvi)", "season(B08,summer)",
		"p50(ndvi)", "p90(ndvi)", "p10(B08)", "p50(B08)", "p90(B08)", "p10(ndwi)"}
	narrow := []string{"B02", "B03", "B04", "B08", "B05", "B06", "B07", "B8A", "B11", "B12",
		"ndvi", "ndwi", "mndwi", "ndbi", "nbr", "ndmi", "evi", "savi", "bsi", "ndre1", "nd(B06,B8A)",
		"mean(B08,7)", "std(ndvi,15)", "p10(ndvi)", "season(B08,summer)", "mean(p10(ndvi),7)"}
	wide := append(slices.Clone(narrow), "p50(ndvi)", "p90(ndvi)", "p10(B08)", "p50(B08)", "p90(B08)", "p10(ndwi)")
	for _, names := range [][]string{narrow, wide} {
		featuresBitExact(t, d, bands, names)
	}
	// Layers: planes mapped to their units by the affine operation, with
	// maps whose products and sums round.
	layers := []features.Layer{{Name: "elevation", Map: features.Affine{Scale: 2375, Offset: -500}},
		{Name: "VV", Map: features.Affine{Scale: 17.5, Offset: -50.3}}, {Name: "emb", Map: features.Affine{Scale: -0.7, Offset: 1e-3}}}
	withLayers := append(slices.Clone(bands[:10]), "elevation", "VV", "emb")
	featuresBitExact(t, d, withLayers, []string{"B04", "elevation", "ndvi", "VV", "emb", "mean(elevation,7)", "std(VV,15)", "range(emb,3)"}, layers...)
}

func featuresBitExact(t *testing.T, d *cuda.Device, bands, names []string, layers ...features.Layer) {
	set, err := features.NewSet(names, bands, layers...)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	const n = 1 << 20
	src := randomPlanes(r, len(bands), n)
	// Exact opposites and sums to zero, so denominators vanish.
	for i := 0; i < n; i += 97 {
		src[3][i] = -src[2][i]
		src[0][i] = -src[8][i] - src[2][i]
	}
	// The context features' planes, which the features pass puts in place.
	src = append(src, randomPlanes(r, len(set.ContextFeatures()), n)...)
	cpu := make([][]float32, len(names))
	gpuOut := make([][]float32, len(names))
	for f := range names {
		cpu[f], gpuOut[f] = make([]float32, n), make([]float32, n)
	}
	if err := (features.CPU{Set: set}).Compute(cpu, src); err != nil {
		t.Fatal(err)
	}
	g, err := NewFeatures(d, set)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	t.Logf("%d features reading %d planes: kernel %s", len(names), len(g.used), g.kernel())
	// Several chunks of an odd size, so both streams and the tail run;
	// then one batch (the pooled, unstaged path).
	for _, chunk := range []int{100_003, n} {
		g.maxChunk = chunk
		for f := range gpuOut {
			clear(gpuOut[f])
		}
		if err := g.Compute(gpuOut, src); err != nil {
			t.Fatal(err)
		}
		for f := range names {
			if i := sameBits(cpu[f], gpuOut[f]); i >= 0 {
				var in []float32
				for _, p := range set.Inputs(f) {
					in = append(in, src[p][i])
				}
				t.Errorf("chunks of %d: %s differs at %d: CPU %v (%08x), GPU %v (%08x), inputs %v", chunk, names[f], i, cpu[f][i], math.Float32bits(cpu[f][i]), gpuOut[f][i], math.Float32bits(gpuOut[f][i]), in)
			}
		}
	}
}

func TestBinBitExact(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	r := rand.New(rand.NewPCG(5, 6))
	const nf, n = 6, 1 << 18
	planes := randomPlanes(r, nf, n)
	x := make([]float32, 0, n*nf)
	for i := range n {
		for f := range nf {
			x = append(x, planes[f][i])
		}
	}
	bins, err := forest.QuantileBins(x, nf, 128, 50_000, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Values exactly on edges.
	for f := range nf {
		for k, e := range bins.Edges[f] {
			planes[f][k] = e
		}
	}
	want := &forest.Binned{N: n, F: nf, Codes: make([]uint8, n*nf)}
	for f := range nf {
		for i := range n {
			want.Codes[f*n+i] = bins.Code(f, planes[f][i])
		}
	}
	got, err := Bin(d, bins, planes)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want.Codes {
		if want.Codes[i] != got.Codes[i] {
			t.Fatalf("code %d: CPU %d GPU %d (value %v)", i, want.Codes[i], got.Codes[i], planes[i/n][i%n])
		}
	}
}

// gaussianRows makes n rows of nf features from k Gaussian classes.
func gaussianRows(r *rand.Rand, n, nf, k int) ([]float32, []uint8) {
	centres := make([][]float64, k)
	for c := range centres {
		centres[c] = make([]float64, nf)
		for f := range nf {
			centres[c][f] = r.NormFloat64()
		}
	}
	x := make([]float32, n*nf)
	y := make([]uint8, n)
	for i := range n {
		c := r.IntN(k)
		for f := range nf {
			x[i*nf+f] = float32(centres[c][f] + r.NormFloat64())
		}
		if r.IntN(20) == 0 {
			x[i*nf+r.IntN(nf)] = float32(math.NaN())
		}
		y[i] = uint8(c)
	}
	return x, y
}

// fitForest bins row-major rows and trains the CPU forest on them.
func fitForest(t *testing.T, x []float32, y []uint8, nf, k int, p forest.Params) (*forest.Forest, *forest.Bins) {
	t.Helper()
	bins, err := forest.QuantileBins(x, nf, p.Bins, 100_000, p.Seed)
	if err != nil {
		t.Fatal(err)
	}
	xb, err := bins.Bin(x, nf)
	if err != nil {
		t.Fatal(err)
	}
	fo, err := forest.Train(context.Background(), xb, y, k, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	return fo, bins
}

func TestForestPredictBitExact(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	r := rand.New(rand.NewPCG(9, 10))
	const nf, k = 16, 10
	x, y := gaussianRows(r, 60_000, nf, k)
	p := forest.Params{Trees: 40, MaxDepth: 14, MinSamplesLeaf: 1, Bins: 128, Bootstrap: true, Seed: 3}
	fo, bins := fitForest(t, x[:40_000*nf], y[:40_000], nf, k, p)
	c := fo.Compile()
	xv, _ := bins.Bin(x[40_000*nf:], nf)
	wantCls, wantConf, _ := c.Classify(xv)
	g, err := NewForest(d, c)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	gotCls, gotConf, err := g.Classify(xv)
	if err != nil {
		t.Fatal(err)
	}
	for i := range wantCls {
		if wantCls[i] != gotCls[i] || math.Float32bits(wantConf[i]) != math.Float32bits(gotConf[i]) {
			t.Fatalf("row %d: CPU %d/%v, GPU %d/%v", i, wantCls[i], wantConf[i], gotCls[i], gotConf[i])
		}
	}
}

// TestPredictorBitExact checks the fused GPU predictor (binning and the
// forest walk on the device, chunks on two streams) against CPU binning
// and the CPU walk, NaN features included.
func TestPredictorBitExact(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	r := rand.New(rand.NewPCG(11, 12))
	const nf, k = 12, 7
	x, y := gaussianRows(r, 50_000, nf, k)
	p := forest.Params{Trees: 25, MaxDepth: 12, MinSamplesLeaf: 1, Bins: 64, Bootstrap: true, Seed: 5}
	fo, bins := fitForest(t, x[:30_000*nf], y[:30_000], nf, k, p)
	rows := x[30_000*nf:]
	n := len(rows) / nf
	for i := 0; i < n; i += 17 {
		rows[i*nf+i%nf] = float32(math.NaN())
	}
	xv, _ := bins.Bin(rows, nf)
	wantCls, wantConf, _ := fo.Compile().Classify(xv)
	planes := make([][]float32, nf)
	for f := range planes {
		planes[f] = make([]float32, n)
		for i := range n {
			planes[f][i] = rows[i*nf+f]
		}
	}
	m := &forest.Model{Bins: bins, Forest: fo}
	g, err := NewPredictor(d, m)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	// Several chunks of an odd size on both streams, then one batch (the
	// pooled, unstaged path).
	for _, chunk := range []int{3001, n} {
		g.maxChunk = chunk
		cls, conf := make([]uint8, n), make([]float32, n)
		if err := g.Predict(planes, cls, conf); err != nil {
			t.Fatal(err)
		}
		for i := range wantCls {
			if wantCls[i] != cls[i] || math.Float32bits(wantConf[i]) != math.Float32bits(conf[i]) {
				t.Fatalf("chunks of %d, row %d: CPU %d/%v, GPU %d/%v", chunk, i, wantCls[i], wantConf[i], cls[i], conf[i])
			}
		}
	}
	cls, conf := make([]uint8, n), make([]float32, n)
	if err := g.Predict(planes[:nf-1], cls, conf); err == nil {
		t.Error("a missing feature plane was accepted")
	}
}

// TestPredictDNBitExact checks the one-pass predictor (digital numbers
// up; reflectance, features, codes and the forest walk on the device)
// against the CPU's reflectance, features, binning and walk, over several
// chunks on both streams and in one, with nodata DNs and vanishing index
// denominators.
func TestPredictDNBitExact(t *testing.T) {
	d := gpu(t)
	defer d.Close()
	// With 17 planes read (temporal planes after the bands), the features
	// take features_wide.
	var temporal []string
	for _, p := range []int{5, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99} {
		temporal = append(temporal, fmt.Sprintf("p%d(ndvi)", p))
	}
	for _, c := range []struct{ bands, names []string }{
		{[]string{"B02", "B03", "B04", "B08", "B11"}, []string{"B02", "B04", "B08", "B11", "ndvi", "ndwi", "evi", "bsi"}},
		{append([]string{"B02", "B03", "B04", "B08", "B11"}, temporal...), append([]string{"B02", "B04", "B08", "B11", "ndvi", "ndwi", "evi", "bsi", "B03"}, temporal...)},
	} {
		predictDNBitExact(t, d, c.bands, c.names)
	}
}

func predictDNBitExact(t *testing.T, d *cuda.Device, bands, names []string) {
	set, err := features.NewSet(names, bands)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(31, 32))
	const n, k = 40_000, 6
	const scale, offset = float32(1e-4), float32(-0.1)
	dn := make([][]uint16, len(bands))
	for b := range dn {
		dn[b] = make([]uint16, n)
		for i := range dn[b] {
			dn[b][i] = uint16(r.IntN(12000))
		}
	}
	for i := 0; i < n; i += 53 {
		dn[i%len(bands)][i] = 0 // nodata
		dn[3][(i+7)%n] = dn[2][(i+7)%n]
	}
	src := make([][]float32, len(bands))
	for b := range src {
		src[b] = composite.Reflectance(dn[b], 0, scale, offset)
	}
	feats := make([][]float32, len(names))
	for f := range feats {
		feats[f] = make([]float32, n)
	}
	if err := (features.CPU{Set: set}).Compute(feats, src); err != nil {
		t.Fatal(err)
	}
	nf := len(names)
	rows := make([]float32, n*nf)
	y := make([]uint8, n)
	for i := range n {
		for f := range nf {
			rows[i*nf+f] = feats[f][i]
		}
		y[i] = uint8(r.IntN(k))
		if v := feats[4][i]; v == v && v > 0.2 {
			y[i] = 0 // a learnable class
		}
	}
	p := forest.Params{Trees: 12, MaxDepth: 10, MinSamplesLeaf: 1, Bins: 32, Bootstrap: true, Seed: 9}
	fo, bins := fitForest(t, rows, y, nf, k, p)
	xb, _ := bins.Bin(rows, nf)
	wantCls, wantConf, _ := fo.Compile().Classify(xb)

	g, err := NewPredictor(d, &forest.Model{Bins: bins, Forest: fo})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	fe, err := NewFeatures(d, set)
	if err != nil {
		t.Fatal(err)
	}
	defer fe.Close()
	for _, chunk := range []int{7001, n} {
		g.maxChunk = chunk
		cls, conf := make([]uint8, n), make([]float32, n)
		if err := g.PredictDN(fe, features.DN{Planes: dn, Scale: scale, Offset: offset}, cls, conf); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if cls[i] != wantCls[i] || math.Float32bits(conf[i]) != math.Float32bits(wantConf[i]) {
				t.Fatalf("chunks of %d, pixel %d: CPU %d/%v, GPU %d/%v", chunk, i, wantCls[i], wantConf[i], cls[i], conf[i])
			}
		}
		if err := g.PredictDN(fe, features.DN{Planes: dn[:4], Scale: scale, Offset: offset}, cls, conf); err == nil {
			t.Error("a missing band plane was accepted")
		}
	}
}

// medianOf returns the median of v (the upper one of an even count).
func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
