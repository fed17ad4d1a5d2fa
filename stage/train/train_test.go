package train

import (
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/lulc/lulc/geo/landcover"
	"github.com/lulc/lulc/learn/sampleset"
	"github.com/lulc/lulc/learn/sampling"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
)

// TestLogSplitFeatures: a split by features says that it has no buffer,
// and which the context features would have given a blocked split.
func TestLogSplitFeatures(t *testing.T) {
	var log strings.Builder
	cfg := config.TrainConfig{Features: []string{"B04", "mean(B08,15)"}}
	cfg.Sampling.Split = sampling.SplitFeatures
	logSplit(cfg, &sampleset.Set{}, stage.Options{Log: textLog(&log)})
	if want := "sampling.split features: no buffer (sampling.buffer works with split blocks only)"; !strings.Contains(log.String(), want) || !strings.Contains(log.String(), "radius 7") {
		t.Errorf("log %q lacks %q and the radius 7", log.String(), want)
	}
	log.Reset()
	cfg.Sampling.Split = sampling.SplitBlocks
	logSplit(cfg, &sampleset.Set{}, stage.Options{Log: textLog(&log)})
	if log.Len() != 0 {
		t.Errorf("a blocked split without a buffer logs %q", log.String())
	}
}

// TestNoSamplesSaysWhy: when the draw gave no sample and its warnings
// say why (every labelled pixel lacks a plane, or has a code outside the
// scheme), training's error is those warnings, not advice about the
// split's block size, which stays for a draw of too few.
func TestNoSamplesSaysWhy(t *testing.T) {
	why := "features: none of the 4000 labelled pixels of the scheme's classes has every band and temporal plane present"
	res := Result{Warnings: []string{why}}
	_, err := checkSamples(config.TrainConfig{}, landcover.WorldCover, &sampleset.Set{}, nil, nil, nil, &res)
	if err == nil || !strings.Contains(err.Error(), "no samples: "+why) || strings.Contains(err.Error(), "block_size") {
		t.Fatalf("no samples, with the draw's warning: %v", err)
	}
	_, err = checkSamples(config.TrainConfig{}, landcover.WorldCover, &sampleset.Set{}, nil, nil, nil, &Result{})
	if err == nil || !strings.Contains(err.Error(), "too few samples") {
		t.Fatalf("no samples, no warning: %v", err)
	}
}

func textLog(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
