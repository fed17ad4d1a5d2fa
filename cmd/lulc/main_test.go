package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/geo/raster"

	"golang.org/x/sys/cpu"
)

// lulc runs a command line in-process, as main would.
func lulc(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestHelpListsWorkingCommands(t *testing.T) {
	code, out, _ := lulc(t, "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"synth", "ingest", "train", "predict", "evaluate", "doctor", "bench", "version"} {
		if !strings.Contains(out, "  "+want+" ") {
			t.Errorf("--help does not list %s:\n%s", want, out)
		}
	}
	if !strings.Contains(out, "  completion ") {
		t.Errorf("--help does not list the completion command:\n%s", out)
	}
}

// TestCompletionAndVersionFlag: shells get a completion script that
// knows lulc's commands, and --version says what `lulc version` starts
// with.
func TestCompletionAndVersionFlag(t *testing.T) {
	code, out, stderr := lulc(t, "completion", "bash")
	if code != 0 || !strings.Contains(out, "__start_lulc") {
		t.Fatalf("completion bash: exit %d, %s%s", code, out[:min(len(out), 200)], stderr)
	}
	code, out, _ = lulc(t, "--version")
	if code != 0 || out != "lulc "+lulcVersion()+"\n" {
		t.Fatalf("--version: exit %d, %q", code, out)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := lulc(t, "version")
	if code != 0 || !strings.Contains(out, "lulc ") || !strings.Contains(out, "go1.") ||
		!strings.Contains(out, "gdal "+raster.GDALVersion()) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestSynthEmbeddedDefault(t *testing.T) {
	out := filepath.Join(t.TempDir(), "scene")
	code, stdout, stderr := lulc(t, "synth", "--quiet", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if stdout != "" || stderr != "" {
		t.Errorf("--quiet printed %q %q", stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "catalog.json")); err != nil {
		t.Fatal(err)
	}
	// A second run refuses to overwrite, and --force replaces.
	code, _, stderr = lulc(t, "synth", "-q", "--out", out)
	if code == 0 || !strings.Contains(stderr, "already exists") || !strings.Contains(stderr, "--force") {
		t.Errorf("existing output: exit %d, %q", code, stderr)
	}
	if code, _, stderr = lulc(t, "synth", "-q", "--force", "--out", out); code != 0 {
		t.Errorf("--force: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "catalog.json")); err != nil {
		t.Fatal(err)
	}
}

// writeConfig writes the tiny config with one line replaced.
func writeConfig(t *testing.T, old, new string) string {
	t.Helper()
	raw, err := configs.Read("synth-tiny.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), old) {
		t.Fatalf("tiny config has no %q", old)
	}
	p := filepath.Join(t.TempDir(), "cfg.yaml")
	if err := os.WriteFile(p, []byte(strings.Replace(string(raw), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSynthBadInput(t *testing.T) {
	dir := t.TempDir()
	notADir := filepath.Join(dir, "file")
	os.WriteFile(notADir, []byte("x"), 0o644)
	existing := filepath.Join(dir, "existing")
	os.Mkdir(existing, 0o755)
	os.WriteFile(filepath.Join(existing, "keep.txt"), []byte("precious"), 0o644)

	cases := []struct {
		name   string
		config string
		out    string
		want   []string
	}{
		{"unknown key", writeConfig(t, "seed:", "colour: red\nseed:"), "", []string{`unknown key "colour"`, "line 3"}},
		{"misspelt key", writeConfig(t, "label_noise:", "label_nosie:"), "", []string{"label_nosie"}},
		{"zero size", writeConfig(t, "size: 252", "size: 0"), "", []string{"size", "0"}},
		{"negative size", writeConfig(t, "size: 252", "size: -252"), "", []string{"size", "-252"}},
		{"size not a multiple of 6", writeConfig(t, "size: 252", "size: 256"), "", []string{"size", "multiple of 6"}},
		{"size beyond memory", writeConfig(t, "size: 252", "size: 99996"), "", []string{"size", "GB of memory"}},
		{"size beyond limit", writeConfig(t, "size: 252", "size: 200004"), "", []string{"size", "larger than"}},
		{"unknown class code", writeConfig(t, "  60: 0.04", "  15: 0.04"), "", []string{"unknown class code 15"}},
		{"bad platform", writeConfig(t, "platform: sentinel-2a", "platform: landsat-8"), "", []string{"platform", "landsat-8"}},
		{"missing config", filepath.Join(dir, "nope.yaml"), "", []string{"no config file", "nope.yaml"}},
		{"unwritable output", "", filepath.Join(notADir, "scene"), []string{"not writable", notADir}},
		{"existing output", "", existing, []string{"already exists", "--force"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := c.out
			if out == "" {
				out = filepath.Join(t.TempDir(), "scene")
			}
			args := []string{"synth", "-q", "--out", out}
			if c.config != "" {
				args = append(args, "--config", c.config)
			}
			code, _, stderr := lulc(t, args...)
			if code == 0 {
				t.Fatalf("exit 0 for %s", c.name)
			}
			for _, w := range c.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("error %q does not mention %q", stderr, w)
				}
			}
			if c.out == "" {
				if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("failed run left %s", out)
				}
				if m, _ := filepath.Glob(filepath.Join(filepath.Dir(out), ".*partial")); len(m) > 0 {
					t.Errorf("failed config check left staging %v", m)
				}
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(existing, "keep.txt")); err != nil || string(b) != "precious" {
		t.Errorf("existing output was touched: %q %v", b, err)
	}
}

func TestIngestCommand(t *testing.T) {
	dir := t.TempDir()
	scene := filepath.Join(dir, "scene")
	if code, _, stderr := lulc(t, "synth", "-q", "--out", scene); code != 0 {
		t.Fatalf("synth: %s", stderr)
	}
	out := filepath.Join(dir, "stack")
	code, stdout, stderr := lulc(t, "ingest", "--catalog", filepath.Join(scene, "catalog.json"), "--out", out)
	if code != 0 {
		t.Fatalf("ingest: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "31TEJ: 3 dates") || !strings.Contains(stdout, "stack.tif") {
		t.Errorf("summary:\n%s", stdout)
	}
	for _, f := range []string{"stack.tif", "labels.tif", "valid_count.tif", "manifest.json"} {
		if _, err := os.Stat(filepath.Join(out, "31TEJ", f)); err != nil {
			t.Error(err)
		}
	}
	// Bad input: a catalog that does not exist, and an unknown config key.
	code, _, stderr = lulc(t, "ingest", "-q", "--catalog", filepath.Join(dir, "none.json"), "--out", filepath.Join(dir, "x"))
	if code == 0 || !strings.Contains(stderr, "none.json") {
		t.Errorf("missing catalog: exit %d, %q", code, stderr)
	}
	bad := filepath.Join(dir, "bad.yaml")
	raw, _ := configs.Read("ingest-tiny.yaml")
	os.WriteFile(bad, []byte(strings.Replace(string(raw), "window:", "windw:", 1)), 0o644)
	code, _, stderr = lulc(t, "ingest", "-q", "--config", bad, "--out", filepath.Join(dir, "y"))
	if code == 0 || !strings.Contains(stderr, "windw") {
		t.Errorf("bad key: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Error("failed ingest left output")
	}
}

func TestTrainCommand(t *testing.T) {
	dir := t.TempDir()
	scene, stack := filepath.Join(dir, "scene"), filepath.Join(dir, "stack")
	if code, _, stderr := lulc(t, "synth", "-q", "--out", scene); code != 0 {
		t.Fatal(stderr)
	}
	if code, _, stderr := lulc(t, "ingest", "-q", "--catalog", filepath.Join(scene, "catalog.json"), "--out", stack); code != 0 {
		t.Fatal(stderr)
	}
	run := filepath.Join(dir, "run")
	code, stdout, stderr := lulc(t, "train", "--stack", stack, "--out", run)
	if code != 0 {
		t.Fatalf("train: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"overall accuracy", "kappa", "Cropland", "model.lulcrf"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	code, _, stderr = lulc(t, "train", "-q", "--stack", stack, "--engine", "sklearn", "--out", filepath.Join(dir, "x"))
	if code == 0 || !strings.Contains(stderr, `engine: "sklearn"`) {
		t.Errorf("bad engine: exit %d, %q", code, stderr)
	}
}

func TestPredictAndEvaluateCommands(t *testing.T) {
	dir := t.TempDir()
	stack, model := demoRun(t, dir)
	raw, _ := configs.Read("predict-demo.yaml")
	cfg := filepath.Join(dir, "predict.yaml")
	body := strings.Replace(strings.Replace(string(raw), "runs/demo/train/model.lulcrf", model, 1), "runs/demo/stack", stack, 1)
	os.WriteFile(cfg, []byte(body), 0o644)
	out := filepath.Join(dir, "pred")
	code, stdout, stderr := lulc(t, "predict", "-c", cfg, "--out", out)
	if code != 0 {
		t.Fatalf("predict: %s", stderr)
	}
	for _, want := range []string{"class map", "quicklook", "STAC item", "Mpx/s"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	if !fileExists(filepath.Join(out, "31TEJ", "confidence.tif")) {
		t.Error("config's confidence: true wrote no confidence.tif")
	}
	code, stdout, stderr = lulc(t, "evaluate", "--prediction", filepath.Join(out, "31TEJ", "class.tif"),
		"--labels", filepath.Join(stack, "31TEJ", "labels.tif"), "--out", filepath.Join(dir, "ev"))
	if code != 0 || !strings.Contains(stdout, "overall accuracy") {
		t.Fatalf("evaluate: exit %d %s %s", code, stdout, stderr)
	}
	code, _, stderr = lulc(t, "predict", "-q", "--model", filepath.Join(dir, "none.lulcrf"), "--input", stack, "--out", filepath.Join(dir, "x"))
	if code == 0 || !strings.Contains(stderr, "none.lulcrf") {
		t.Errorf("missing model: exit %d %q", code, stderr)
	}
}

func TestPredictFromSTAC(t *testing.T) {
	dir := t.TempDir()
	stack, model := demoRun(t, dir)
	scene := filepath.Join(dir, "scene")
	out := filepath.Join(dir, "fromstac")
	if code, _, stderr := lulc(t, "predict", "-q", "--model", model, "--catalog", filepath.Join(scene, "catalog.json"), "--out", out); code != 0 {
		t.Fatalf("predict from STAC: %s", stderr)
	}
	direct := filepath.Join(dir, "direct")
	if code, _, stderr := lulc(t, "predict", "-q", "--model", model, "--input", stack, "--out", direct); code != 0 {
		t.Fatal(stderr)
	}
	a, _ := os.ReadFile(filepath.Join(out, "31TEJ", "class.tif"))
	b, _ := os.ReadFile(filepath.Join(direct, "31TEJ", "class.tif"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Error("prediction from the STAC catalog differs from prediction from its stack")
	}
}

func TestDeviceFlagAndDoctor(t *testing.T) {
	code, stdout, _ := lulc(t, "doctor")
	if code != 0 || !strings.Contains(stdout, "lulc will compute on the") {
		t.Fatalf("doctor: exit %d\n%s", code, stdout)
	}
	// The CPU's line says whether the vector kernels run, as this CPU has
	// them or not.
	want := "; no AVX-512:"
	if cpu.X86.HasAVX512F {
		want = "; AVX-512:"
	}
	if !strings.Contains(stdout, "CPU: ") || !strings.Contains(stdout, want) {
		t.Errorf("doctor: no CPU line saying %q\n%s", want, stdout)
	}
	if strings.Contains(stdout, "not usable") {
		// No GPU here: gpu must fail clearly, auto must fall back.
		dir := t.TempDir()
		code, _, stderr := lulc(t, "ingest", "-q", "--device", "gpu", "--catalog", filepath.Join(dir, "none.json"), "--out", filepath.Join(dir, "o"))
		if code == 0 || !strings.Contains(stderr, "no usable GPU") {
			t.Errorf("--device gpu without a GPU: exit %d, %q", code, stderr)
		}
	}
	code, _, stderr := lulc(t, "predict", "-q", "--device", "tpu", "--model", "m", "--input", "i", "--out", filepath.Join(t.TempDir(), "o"))
	if code == 0 || !strings.Contains(stderr, `--device "tpu"`) {
		t.Errorf("bad device: exit %d, %q", code, stderr)
	}
	for spec, want := range map[string]string{"gpu:1,1": "GPU 1 is named twice", "gpu:0,x": `"x" is not a GPU index`, "gpu:": `"" is not a GPU index`, "gpu:-1": `"-1" is not a GPU index`} {
		code, _, stderr := lulc(t, "run", "-q", "--device", spec, "--out", filepath.Join(t.TempDir(), "o"))
		if code != exitUsage || !strings.Contains(stderr, want) {
			t.Errorf("--device %s: exit %d, %q (want %q)", spec, code, stderr, want)
		}
	}
}

func TestDeviceIndices(t *testing.T) {
	for spec, want := range map[string][]int{"gpu": {0}, "gpu:0": {0}, "gpu:2,0": {2, 0}, "gpu:0,1,3": {0, 1, 3}} {
		got, err := deviceIndices(spec)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s: %v, %v; want %v", spec, got, err, want)
		}
	}
}

// TestExitCodes checks that command-line mistakes exit 2, failures of the
// work 1, and that each says what is wrong.
func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"frobnicate"}, exitUsage, "unknown command"},
		{[]string{"ingest", "--bogus"}, exitUsage, "unknown flag: --bogus"},
		{[]string{"ingest"}, exitUsage, "--out"},
		{[]string{"ingest", "stray", "--out", filepath.Join(dir, "o")}, exitUsage, "unknown command \"stray\""},
		{[]string{"train", "--window", "x", "--out", filepath.Join(dir, "o")}, exitUsage, "unknown flag"},
		{[]string{"predict", "--window", "many", "--out", filepath.Join(dir, "o")}, exitUsage, "invalid argument"},
		{[]string{"predict", "--out", filepath.Join(dir, "o")}, exitUsage, "--model and --input"},
		{[]string{"evaluate", "--out", filepath.Join(dir, "o")}, exitUsage, "--prediction, --labels and --out are required"},
		{[]string{"run", "--device", "tpu", "--out", filepath.Join(dir, "o")}, exitUsage, "--device \"tpu\""},
		{[]string{"-q", "-v", "version"}, exitUsage, "[quiet verbose]"},
		{[]string{"ingest", "-q", "--catalog", filepath.Join(dir, "none.json"), "--out", filepath.Join(dir, "o")}, exitFailure, "none.json"},
	}
	for _, c := range cases {
		code, _, stderr := lulc(t, c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q; want exit %d naming %q", c.args, code, stderr, c.code, c.want)
		}
	}
}

// TestTrainGolearnSaysNoModel: golearn's run says plainly that it writes
// no model, and writes none.
func TestTrainGolearnSaysNoModel(t *testing.T) {
	w := hostileWorld(t)
	out := filepath.Join(t.TempDir(), "gl")
	code, stdout, stderr := lulc(t, "train", "--engine", "golearn", "--stack", w.stack, "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "golearn writes no model") || strings.Contains(stdout, "model.lulcrf") {
		t.Errorf("the summary does not say that no model is written:\n%s", stdout)
	}
	if _, err := os.Stat(filepath.Join(out, "model.lulcrf")); err == nil {
		t.Error("a golearn run wrote model.lulcrf")
	}
}

// TestFlagsFromEnvironment: LULC_<FLAG> sets a flag the command line does
// not give; the command line wins; a bad value is a usage error naming
// the variable.
func TestFlagsFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("LULC_OUT", filepath.Join(dir, "from-env"))
	t.Setenv("LULC_QUIET", "true")
	if code, stdout, stderr := lulc(t, "synth"); code != 0 || stdout != "" || stderr != "" {
		t.Fatalf("synth with LULC_OUT and LULC_QUIET: exit %d, %q, %q", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "from-env", "catalog.json")); err != nil {
		t.Fatal("LULC_OUT was not used")
	}
	if code, _, stderr := lulc(t, "synth", "--out", filepath.Join(dir, "from-flag")); code != 0 {
		t.Fatalf("flag over environment: %s", stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "from-flag", "catalog.json")); err != nil {
		t.Fatal("the --out flag did not win over LULC_OUT")
	}
	t.Setenv("LULC_FORCE", "maybe")
	if code, _, stderr := lulc(t, "synth"); code != exitUsage || !strings.Contains(stderr, "LULC_FORCE") {
		t.Fatalf("bad LULC_FORCE: exit %d, %q", code, stderr)
	}
}

// TestRunShardFlags: the task comes from --shard or an array job's
// variables; malformed or conflicting ones are usage errors, and a
// sharded run needs a model.
func TestRunShardFlags(t *testing.T) {
	out := filepath.Join(t.TempDir(), "o")
	code, _, stderr := lulc(t, "run", "-q", "--shard", "3", "--out", out)
	if code != exitUsage || !strings.Contains(stderr, "not i/n") {
		t.Errorf("--shard 3: exit %d, %q", code, stderr)
	}
	t.Setenv("SLURM_ARRAY_TASK_ID", "1")
	t.Setenv("SLURM_ARRAY_TASK_COUNT", "4")
	code, _, stderr = lulc(t, "run", "-q", "--shard", "2/4", "--out", out)
	if code != exitUsage || !strings.Contains(stderr, "disagree") {
		t.Errorf("--shard 2/4 in Slurm task 1: exit %d, %q", code, stderr)
	}
	t.Setenv("JOB_COMPLETION_INDEX", "1")
	code, _, stderr = lulc(t, "run", "-q", "--out", out)
	if code != exitUsage || !strings.Contains(stderr, "several array-job engines") {
		t.Errorf("Slurm and Kubernetes variables: exit %d, %q", code, stderr)
	}
	t.Setenv("JOB_COMPLETION_INDEX", "")
	code, _, stderr = lulc(t, "run", "-q", "--out", out)
	if code != 1 || !strings.Contains(stderr, "--model") {
		t.Errorf("a sharded run without a model: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "shards", "1-of-4")); err == nil {
		t.Error("a refused task wrote its run directory")
	}
}

// TestBenchDecodeCommand times decoding the real Earth Search COGs (GDAL
// and lulc's Go decoder; the GPU where there is one) and checks the
// report, then the usage errors.
func TestBenchDecodeCommand(t *testing.T) {
	dir := "../../../shared/data/earthsearch-s2-l2a-29RKH-2020-02-19"
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("real sample data not available: %v", err)
	}
	out := filepath.Join(t.TempDir(), "decode")
	code, stdout, stderr := lulc(t, "bench", "decode", dir, "--out", out, "--threads", "2", "--device", "cpu")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Tiles   int   `json:"tiles"`
		Decoded int64 `json:"decoded_bytes"`
		Runs    []struct {
			Engine string  `json:"engine"`
			GBps   float64 `json:"decoded_gb_per_s"`
		} `json:"runs"`
		Skipped []string `json:"skipped"`
	}
	raw, err := os.ReadFile(filepath.Join(out, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	// 13 single-band COGs (TCI and the preview have three bands).
	if rep.Tiles < 50 || rep.Decoded <= 0 || len(rep.Runs) != 2 || len(rep.Skipped) != 2 {
		t.Fatalf("report %+v", rep)
	}
	for _, r := range rep.Runs {
		if r.GBps <= 0 {
			t.Errorf("%s: %v GB/s", r.Engine, r.GBps)
		}
	}
	if !strings.Contains(stdout, "go twin, 2 threads") {
		t.Errorf("stdout: %s", stdout)
	}
	if code, _, stderr := lulc(t, "bench", "decode", dir); code != 2 || !strings.Contains(stderr, "--out") {
		t.Errorf("no --out: exit %d, %s", code, stderr)
	}
	if code, _, stderr := lulc(t, "bench", "decode", t.TempDir(), "--out", filepath.Join(t.TempDir(), "x")); code == 0 || !strings.Contains(stderr, "no .tif files") {
		t.Errorf("empty directory: exit %d, %s", code, stderr)
	}
}
