package pipeline

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/lulc/lulc/geo"
	"github.com/lulc/lulc/geo/raster"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/train"
)

// textLog is a logger writing text lines to w.
func textLog(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// labelledPair writes a 100 × 100 two-band image (values that vary with
// the pixel, so that classes are learnable) and the labels given, and
// returns a train config reading them with blocks of 10 pixels.
func labelledPair(t *testing.T, labels []uint8) config.TrainConfig {
	t.Helper()
	dir := t.TempDir()
	img, lab := filepath.Join(dir, "img.tif"), filepath.Join(dir, "lab.tif")
	g := geo.Grid{EPSG: 32631, Width: 100, Height: 100, Transform: [6]float64{500000, 10, 0, 5000000, 0, -10}}
	w, err := raster.NewWriter(img, g, "uint16", []raster.BandInfo{{}, {}}, raster.COGOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for b := range 2 {
		v := make([]uint16, 100*100)
		for i := range v {
			v[i] = uint16(1000 + 300*b + 7*int(labels[i]) + i%13)
		}
		w.Write(b, 0, 0, 100, 100, v)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := raster.WriteCOG(lab, g, labels, raster.COGOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := trainConfig(t, "train-demo.yaml", "")
	cfg.Input.Stack = ""
	cfg.Input.Rasters = append(cfg.Input.Rasters, struct {
		Image  string `yaml:"image"`
		Labels string `yaml:"labels"`
	}{img, lab})
	cfg.Input.Bands, cfg.Input.Scale = []string{"B04", "B08"}, 0.0001
	cfg.Features = []string{"B04", "B08", "ndvi"}
	cfg.Sampling.BlockSize, cfg.Sampling.MinPerClass, cfg.Sampling.Buffer = 10, 1, 0
	return cfg
}

// TestSchemeFitWarning trains WorldCover-coded labels as esri-io: before
// the samples are checked, training says that the labels fit
// esa-worldcover better, with both shares; trained as esa-worldcover,
// it says nothing of the kind.
func TestSchemeFitWarning(t *testing.T) {
	labels := make([]uint8, 100*100)
	for i := range labels {
		labels[i] = []uint8{10, 10, 40, 80}[i%4] // esri-io has a 10 (clouds), no 40 or 80
	}
	cfg := labelledPair(t, labels)
	cfg.Classes.Scheme = "esri-io"
	var log strings.Builder
	// Esri/IO's one matching code leaves one class: training fails, after
	// the warning that says why.
	_, err := train.Train(context.Background(), cfg, stage.Options{Out: filepath.Join(t.TempDir(), "io"), Log: textLog(&log)})
	if err == nil {
		t.Error("one class trained")
	}
	want := "labels fit esa-worldcover (100 % of labelled pixels, 3 of 3 codes) better than the chosen esri-io (50 %, 1 of 3 codes): set classes.scheme: esa-worldcover"
	if !strings.Contains(log.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, log.String())
	}
	cfg.Classes.Scheme = "esa-worldcover"
	log.Reset()
	res, err := train.Train(context.Background(), cfg, stage.Options{Out: filepath.Join(t.TempDir(), "wc"), Log: textLog(&log)})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log.String(), "labels fit") || strings.Contains(strings.Join(res.Warnings, "\n"), "labels fit") {
		t.Errorf("the chosen scheme fits, yet:\n%s", log.String())
	}
}

// TestClassLostToSplit labels a small class (grassland, 30) in the centre
// 2 × 2 pixels of ten blocks: the buffer (9 pixels, blocks of 10) and the
// validation blocks take every one of its pixels. Training reports it as
// lost to the split with its counts and the settings to change, names the
// classes the labels never had in one message apart, and logs the three
// classes the labels hold, not the scheme's eleven.
func TestClassLostToSplit(t *testing.T) {
	labels := make([]uint8, 100*100)
	for i := range labels {
		labels[i] = []uint8{10, 40}[(i/100/10+i%100/10)%2]
	}
	for b := range 10 {
		r0, c0 := 10*(b*3%10)+4, 10*(b*7%10)+4
		for _, d := range []int{0, 1, 100, 101} {
			labels[r0*100+c0+d] = 30
		}
	}
	cfg := labelledPair(t, labels)
	cfg.Sampling.Buffer, cfg.Sampling.ValidationFraction = 9, 0.6
	var log strings.Builder
	res, err := train.Train(context.Background(), cfg, stage.Options{Out: filepath.Join(t.TempDir(), "run"), Log: textLog(&log)})
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(res.Warnings, "\n")
	lost := regexp.MustCompile(`class 30 \(Grassland\) lost every training pixel to the split: of its 40 labelled pixels, (\d+) lie in validation blocks, sampling.buffer 9 dropped the (\d+) training pixels within 9 pixels of a validation block; .*lower sampling.buffer \(9; 0 turns it off\)`).FindStringSubmatch(all)
	if lost == nil {
		t.Fatalf("no lost-class warning in %q", all)
	}
	v, _ := strconv.Atoi(lost[1])
	b, _ := strconv.Atoi(lost[2])
	if v+b != 40 || b == 0 || v == 0 {
		t.Errorf("validation %d + buffered %d, want 40, both above 0", v, b)
	}
	if !strings.Contains(all, "labels: 8 of the 11 classes of the scheme esa-worldcover have no labelled pixel, so the model will never predict them: 20 (Shrubland), 50 (Built-up)") {
		t.Errorf("absent classes not named apart: %q", all)
	}
	if strings.Contains(all, "30 (Grassland) has no") || strings.Contains(all, "no labelled pixel, so the model will never predict them: 20 (Shrubland), 30") {
		t.Errorf("grassland reported as absent: %q", all)
	}
	if !strings.Contains(log.String(), " classes=3 scheme_classes=11") {
		t.Errorf("the log does not count the labels' 3 classes:\n%s", log.String())
	}
	if !strings.Contains(log.String(), "lost every training pixel") {
		t.Errorf("the warning is not logged:\n%s", log.String())
	}
}

// TestDocCustomSchemeExample parses the custom scheme example of
// docs/train.md (the YAML block after its custom-scheme-example marker):
// the documented config must be one training accepts, with the classes
// and remap it describes.
func TestDocCustomSchemeExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "train.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "<!-- custom-scheme-example:")
	if !ok {
		t.Fatal("docs/train.md has no custom-scheme-example marker")
	}
	_, block, ok := strings.Cut(after, "```yaml\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal("no YAML block after the custom-scheme-example marker")
	}
	cfg, err := config.ParseTrainConfig([]byte(block))
	if err != nil {
		t.Fatalf("the documented custom scheme does not parse: %v", err)
	}
	s, err := cfg.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "my-survey" || !slices.Equal(s.Codes(), []uint8{1, 2, 3, 4, 5}) || cfg.Remap()[6] != 1 {
		t.Errorf("scheme %s %v, remap %v", s.Name, s.Codes(), cfg.Classes.Remap)
	}
}
