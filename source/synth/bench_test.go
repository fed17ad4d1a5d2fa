package synth

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkGenerate times pixel synthesis alone (no encoding) for a
// 2040² scene with the tiny config's three dates.
func BenchmarkGenerate(b *testing.B) {
	cfg := tinyConfig(b)
	cfg.Size = 2040
	geo, err := newGeometry(cfg)
	if err != nil {
		b.Fatal(err)
	}
	sc := newScene(cfg, geo.labelUV)
	b.ResetTimer()
	for b.Loop() {
		acqs := make([]*acquisition, len(cfg.Dates))
		for i := range cfg.Dates {
			acqs[i] = newAcquisition(sc, i, geo.centerLat)
		}
		sc.generate(acqs, nil)
	}
	px := float64(cfg.Size*cfg.Size*len(cfg.Dates)) * float64(b.N)
	b.ReportMetric(px/b.Elapsed().Seconds()/1e6, "Mpx·dates/s")
}

// BenchmarkSynthFull runs `lulc synth` on configs/synth-full.yaml end to
// end, reporting generation and encoding separately. It needs about 8 GB of
// memory and minutes on two cores, so it runs only with LULC_BENCH_FULL=1.
func BenchmarkSynthFull(b *testing.B) {
	if os.Getenv("LULC_BENCH_FULL") == "" {
		b.Skip("set LULC_BENCH_FULL=1 to generate a full 10980² tile")
	}
	cfg, _, err := LoadConfig("../../configs/synth-full.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var gen, enc time.Duration
	var bytes int64
	for b.Loop() {
		out := filepath.Join(b.TempDir(), "full")
		res, err := Run(context.Background(), cfg, Options{Out: out})
		if err != nil {
			b.Fatal(err)
		}
		gen += res.Generate
		enc += res.Write
		bytes = res.OutBytes
		os.RemoveAll(out)
	}
	n := float64(b.N)
	b.ReportMetric(gen.Seconds()/n, "generate-s")
	b.ReportMetric(enc.Seconds()/n, "encode-s")
	b.ReportMetric(float64(bytes)/1e6, "out-MB")
	b.ReportMetric(float64(bytes)/1e6/((gen+enc).Seconds()/n), "MB/s")
}
