package main

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/lulc/lulc/configs"
	"github.com/lulc/lulc/scale/exchange"
	"github.com/lulc/lulc/stage"
)

// The promise these tests hold lulc to: SIGINT or SIGTERM in any long
// phase of a command stops it within interruptLimit with exit code 130,
// commits nothing (no output at the final path, no commit object in the
// store), and a rerun of the same command gives the bytes of a run that
// was never interrupted.

// interruptLimit is how long an interrupted command may take to exit.
const interruptLimit = 2 * time.Second

// iworld is a scene large enough that every phase lasts a while on one
// core (756² pixels, four windows of up to 512), its configs and the
// uninterrupted outputs the reruns are compared with, made once.
type iworld struct {
	dir, catalog, ingestCfg, trainCfg, runCfg, stack string
	model                                            string // trained on the stack, for map-only runs
}

var (
	iworldOnce sync.Once
	theIWorld  iworld
	iworldErr  error
)

func interruptWorld(t *testing.T) iworld {
	t.Helper()
	iworldOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lulc-interrupt-")
		if err != nil {
			iworldErr = err
			return
		}
		w := iworld{dir: dir, catalog: filepath.Join(dir, "scene", "catalog.json"), ingestCfg: filepath.Join(dir, "ingest.yaml"),
			trainCfg: filepath.Join(dir, "train.yaml"), runCfg: filepath.Join(dir, "run.yaml"), stack: filepath.Join(dir, "stack"),
			model: filepath.Join(dir, "model", stage.ModelFile)}
		write := func(name, embedded string, repl ...string) string {
			raw, err := configs.Read(embedded)
			if err != nil {
				iworldErr = err
				return ""
			}
			body := string(raw)
			for i := 0; i < len(repl); i += 2 {
				if !strings.Contains(body, repl[i]) {
					iworldErr = fmt.Errorf("%s has no %q", embedded, repl[i])
					return ""
				}
				body = strings.Replace(body, repl[i], repl[i+1], 1)
			}
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				iworldErr = err
			}
			return p
		}
		synthCfg := write("synth.yaml", "synth-tiny.yaml", "size: 252", "size: 756", "bands_60m: true", "bands_60m: false")
		write("ingest.yaml", "ingest-tiny.yaml", "bbox: [2.99, 45.12, 3.04, 45.16]", "bbox: [2.9, 45.0, 3.3, 45.2]", "window: 1024", "window: 512")
		// 40 trees: the map's walk is most of a run's time on the CPU.
		write("train.yaml", "train-demo.yaml", "trees: 100", "trees: 40")
		write("run.yaml", "run-demo.yaml", "ingest: ingest-tiny.yaml", "ingest: "+w.ingestCfg, "train: train-demo.yaml", "train: "+w.trainCfg,
			"window: 1024", "window: 512")
		if iworldErr != nil {
			return
		}
		for _, args := range [][]string{
			{"synth", "-q", "-c", synthCfg, "--out", filepath.Join(dir, "scene")},
			{"ingest", "-q", "-c", w.ingestCfg, "--catalog", w.catalog, "--out", w.stack},
			{"train", "-q", "-c", w.trainCfg, "--stack", w.stack, "--out", filepath.Join(dir, "model")},
		} {
			if code, _, stderr := lulc(t, args...); code != 0 {
				iworldErr = fmt.Errorf("%v: %s", args, stderr)
				return
			}
		}
		theIWorld = w
	})
	if iworldErr != nil {
		t.Fatal(iworldErr)
	}
	return theIWorld
}

// phase is one long phase of a command and how to catch it.
type phase struct {
	name string
	// args is the command line writing into out (no -q or -v).
	args func(w iworld, out string) []string
	// at is the log line after which the signal is sent; done a line that,
	// seen before the process exits, shows that the phase ended before the
	// signal reached it. strict phases are long enough that it must not.
	at, done string
	strict   bool
	sig      syscall.Signal
	// timings are files whose bytes hold timings, left out of the
	// comparison with the uninterrupted run.
	timings []string
}

func TestInterruptEachPhase(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 756² scene's commands about twenty times")
	}
	w := interruptWorld(t)
	ingest := func(w iworld, out string) []string {
		return []string{"ingest", "-c", w.ingestCfg, "--catalog", w.catalog, "--out", out}
	}
	run := func(w iworld, out string) []string {
		return []string{"run", "-c", w.runCfg, "--catalog", w.catalog, "--out", out}
	}
	// A run given a model predicts the tile beside its composite.
	mapOnly := func(w iworld, out string) []string {
		return []string{"run", "-c", w.runCfg, "--catalog", w.catalog, "--model", w.model, "--out", out}
	}
	train := func(w iworld, out string) []string {
		return []string{"train", "-c", w.trainCfg, "--stack", w.stack, "--out", out}
	}
	// commit.json holds report.json's checksum, so its bytes follow the timings.
	runTimings := []string{"report.json", "commit.json", filepath.Join("model", "run.json")}
	phases := []phase{
		{name: "read", args: ingest, at: `step=planned`, done: `step=composited`, strict: true, sig: syscall.SIGINT},
		{name: "composite", args: run, at: `msg="window composited"`, done: `step=composited`, sig: syscall.SIGTERM, timings: runTimings},
		{name: "encode", args: ingest, at: `step=composited`, done: `step=encoded`, sig: syscall.SIGINT},
		{name: "draw", args: run, at: `step=composited`, done: `step="candidates drawn"`, sig: syscall.SIGINT, timings: runTimings},
		{name: "fit", args: run, at: `msg=samples`, done: `msg="fit: validation rows classified"`, strict: true, sig: syscall.SIGINT, timings: runTimings},
		{name: "fit-train", args: train, at: `msg=samples`, done: `msg="fit: validation rows classified"`, strict: true, sig: syscall.SIGTERM, timings: []string{"run.json"}},
		{name: "aoa", args: run, at: `area of applicability: measuring`, done: `msg="area of applicability"`, sig: syscall.SIGINT, timings: runTimings},
		{name: "stream", args: run, at: `predict: writers and predictor ready`, done: `step=predicted`, strict: true, sig: syscall.SIGINT, timings: runTimings},
		{name: "encode-map", args: run, at: `step=predicted`, done: `predict: outputs finished`, sig: syscall.SIGTERM, timings: runTimings},
		{name: "map-beside", args: mapOnly, at: `predict: writers and predictor ready`, done: `step=predicted`, strict: true, sig: syscall.SIGINT, timings: runTimings},
	}
	wants := map[string]string{}
	for _, p := range phases {
		t.Run(p.name, func(t *testing.T) {
			// The outputs sit at one depth under the scene's directory: items
			// link the scene and the model by relative paths.
			dir := filepath.Join(w.dir, "phase-"+p.name)
			// Phases of one command line share its uninterrupted output.
			key := strings.Join(p.args(w, ""), " ")
			want, ok := wants[key]
			if !ok {
				want = filepath.Join(w.dir, fmt.Sprintf("want-%d", len(wants)), "out")
				if code, _, stderr := lulc(t, append([]string{"-q"}, p.args(w, want)...)...); code != 0 {
					t.Fatalf("uninterrupted %s: %s", key, stderr)
				}
				wants[key] = want
			}
			out := filepath.Join(dir, "out")
			interrupt(t, p, p.args(w, out), out, func() bool { return exists(filepath.Join(dir, ".out.partial")) })
			if code, _, stderr := lulc(t, append([]string{"-q"}, p.args(w, out)...)...); code != 0 {
				t.Fatalf("rerun after the interrupt: %s", stderr)
			}
			sameTrees(t, want, out, p.timings)
		})
	}
}

// interrupt runs lulc args in a process of its own (-v), sends p.sig once
// the log holds p.at, and checks that the process exits with 130 within
// interruptLimit, having committed nothing at out, and that it left
// something for the rerun to resume (staged).
func interrupt(t *testing.T, p phase, args []string, out string, staged func() bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-v"}, args...)...)
	cmd.Env = append(os.Environ(), "LULC_TEST_MAIN=1")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	lines := bufio.NewScanner(pipe)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	sent := time.Time{}
	afterSignal := -1
	for lines.Scan() {
		line := lines.Text()
		log.WriteString(line + "\n")
		if sent.IsZero() && strings.Contains(line, p.at) {
			if err := cmd.Process.Signal(p.sig); err != nil {
				t.Fatal(err)
			}
			sent, afterSignal = time.Now(), log.Len()
		}
	}
	err = cmd.Wait()
	took := time.Since(sent)
	if sent.IsZero() {
		t.Fatalf("the log never showed %q:\n%s", p.at, log.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitInterrupted {
		t.Fatalf("%v in the %s phase: %v, want exit code %d\n%s", p.sig, p.name, err, exitInterrupted, log.String())
	}
	if took > interruptLimit {
		t.Errorf("%v in the %s phase: the process took %v to exit (at most %v)", p.sig, p.name, took.Round(time.Millisecond), interruptLimit)
	}
	if strings.Contains(log.String()[afterSignal:], p.done) {
		if p.strict {
			t.Errorf("the %s phase ran to its end (%q) after %v", p.name, p.done, p.sig)
		} else {
			t.Logf("the %s phase ended (%q) before %v reached it: the phase after it was interrupted", p.name, p.done, p.sig)
		}
	}
	if exists(out) {
		t.Fatalf("an interrupted %s committed its output %s", args[0], out)
	}
	if !staged() {
		t.Errorf("an interrupted %s left nothing to resume", args[0])
	}
}

// workspaceKept says whether a workspace under parent still holds an
// output (exchange.Workspace.Out), kept for a rerun.
func workspaceKept(parent string) bool {
	outs, _ := filepath.Glob(filepath.Join(parent, "lulc-work-*", "out", "*"))
	return len(outs) > 0
}

// sameTrees fails unless got holds exactly want's files with the same
// bytes, the files named in skip (relative) compared by presence only.
func sameTrees(t *testing.T, want, got string, skip []string) {
	t.Helper()
	a, b := treeHashes(t, want), treeHashes(t, got)
	if len(a) < 5 {
		t.Fatalf("the uninterrupted output %s holds only %d entries", want, len(a))
	}
	for p, h := range a {
		g, ok := b[p]
		switch {
		case !ok:
			t.Errorf("%s is missing after the rerun", p)
		case g != h && !slices.Contains(skip, p):
			t.Errorf("%s differs from the uninterrupted run's%s", p, textDiff(filepath.Join(want, p), filepath.Join(got, p)))
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			t.Errorf("%s was not in the uninterrupted run's output", p)
		}
	}
}

// TestInterruptUpload interrupts `lulc run --out s3://…` and `lulc train
// --out s3://…` while they upload their finished output to a store that
// takes a while over each object: the process exits with 130 in time, no
// commit object is written, and a rerun uploads and commits the objects
// of an uninterrupted run.
func TestInterruptUpload(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo scene's job and training three times each")
	}
	w := hostileWorld(t)
	store := newSlowS3(150 * time.Millisecond)
	srv := httptest.NewServer(store)
	defer srv.Close()
	for k, v := range map[string]string{"AWS_S3_ENDPOINT": strings.TrimPrefix(srv.URL, "http://"), "AWS_HTTPS": "NO", "AWS_VIRTUAL_HOSTING": "FALSE",
		"AWS_ACCESS_KEY_ID": "lulc", "AWS_SECRET_ACCESS_KEY": "lulc-secret", "AWS_REGION": "us-east-1", "CPL_VSIL_CURL_NON_CACHED": "/vsis3/"} {
		t.Setenv(k, v)
	}
	for _, c := range []struct {
		name    string
		args    []string
		timings []string
	}{
		{"run", []string{"run", "--catalog", w.catalog}, []string{"report.json", "commit.json", "model/run.json"}},
		{"train", []string{"train", "--stack", w.stack}, []string{"run.json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			work := t.TempDir()
			args := func(prefix string) []string {
				return append(slices.Clone(c.args), "--work", work, "--out", "s3://lulc-test/"+c.name+"/"+prefix)
			}
			if code, _, stderr := lulc(t, append([]string{"-q"}, args("want")...)...); code != 0 {
				t.Fatalf("uninterrupted %s: %s", c.name, stderr)
			}
			p := phase{name: "upload", at: `msg=uploading`, done: `msg="uploaded and committed"`, strict: true, sig: syscall.SIGINT}
			got := c.name + "/got/"
			// What is left to resume is objects already in the store, or,
			// when the signal came before the first object landed (a
			// loaded machine), the finished output kept in the workspace.
			interrupt(t, p, args("got"), filepath.Join(work, "no-such-output"), func() bool { return store.has(got) || workspaceKept(work) })
			if store.has(got + exchange.CommitFile) {
				t.Fatal("an interrupted upload wrote its commit object")
			}
			if code, _, stderr := lulc(t, append([]string{"-q"}, args("got")...)...); code != 0 {
				t.Fatalf("rerun after the interrupt: %s", stderr)
			}
			if !store.has(got + exchange.CommitFile) {
				t.Fatal("the rerun wrote no commit object")
			}
			wantObjs, gotObjs := store.under(c.name+"/want/"), store.under(got)
			if len(wantObjs) < 5 {
				t.Fatalf("the uninterrupted %s uploaded %d objects", c.name, len(wantObjs))
			}
			for name, body := range wantObjs {
				g, ok := gotObjs[name]
				switch {
				case !ok:
					t.Errorf("%s was not uploaded by the rerun", name)
				case !bytes.Equal(g, body) && name != exchange.CommitFile && !slices.Contains(c.timings, name):
					t.Errorf("%s differs from the uninterrupted %s's", name, c.name)
				}
			}
			for name := range gotObjs {
				if _, ok := wantObjs[name]; !ok {
					t.Errorf("the rerun uploaded %s, which the uninterrupted %s did not", name, c.name)
				}
			}
		})
	}
}

// slowS3 is an in-memory S3 bucket for GDAL's /vsis3/ (path-style
// requests: GET, HEAD, PUT, DELETE of objects and ListObjectsV2), each
// PUT held for delay, so that an upload lasts long enough to interrupt.
type slowS3 struct {
	mu      sync.Mutex
	delay   time.Duration
	objects map[string][]byte // by key, bucket left out
}

func newSlowS3(delay time.Duration) *slowS3 {
	return &slowS3{delay: delay, objects: map[string][]byte{}}
}

func (s *slowS3) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	// /bucket/key…
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 2)
	key := ""
	if len(parts) == 2 {
		key = parts[1]
	}
	switch {
	case r.Method == http.MethodPut:
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		time.Sleep(s.delay)
		s.mu.Lock()
		s.objects[key] = body
		s.mu.Unlock()
		rw.Header().Set("ETag", `"etag"`)
	case r.Method == http.MethodDelete:
		s.mu.Lock()
		delete(s.objects, key)
		s.mu.Unlock()
		rw.WriteHeader(http.StatusNoContent)
	case key == "" && r.Method == http.MethodGet:
		s.list(rw, r.URL.Query().Get("prefix"), r.URL.Query().Get("delimiter"))
	default:
		s.mu.Lock()
		body, ok := s.objects[key]
		s.mu.Unlock()
		if !ok {
			rw.Header().Set("Content-Type", "application/xml")
			rw.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(rw, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>no %s</Message></Error>`, key)
			return
		}
		http.ServeContent(rw, r, key, time.Time{}, bytes.NewReader(body))
	}
}

// list answers ListObjectsV2 (or V1) for a prefix, one level deep when a
// delimiter is given.
func (s *slowS3) list(rw http.ResponseWriter, prefix, delim string) {
	type content struct {
		Key  string
		Size int
	}
	type common struct{ Prefix string }
	res := struct {
		XMLName        xml.Name `xml:"ListBucketResult"`
		Name           string
		Prefix         string
		IsTruncated    bool
		Contents       []content
		CommonPrefixes []common
	}{Name: "lulc-test", Prefix: prefix}
	s.mu.Lock()
	keys := make([]string, 0, len(s.objects))
	for k := range s.objects {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	seen := map[string]bool{}
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		rest := k[len(prefix):]
		if i := strings.Index(rest, delim); delim != "" && i >= 0 {
			if p := prefix + rest[:i+1]; !seen[p] {
				seen[p] = true
				res.CommonPrefixes = append(res.CommonPrefixes, common{p})
			}
			continue
		}
		res.Contents = append(res.Contents, content{k, len(s.objects[k])})
	}
	s.mu.Unlock()
	rw.Header().Set("Content-Type", "application/xml")
	xml.NewEncoder(rw).Encode(res)
}

// has reports whether an object exists with key, or, for a key ending in
// "/", any object under it.
func (s *slowS3) has(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if strings.HasSuffix(key, "/") {
		for k := range s.objects {
			if strings.HasPrefix(k, key) {
				return true
			}
		}
		return false
	}
	_, ok := s.objects[key]
	return ok
}

// under returns the objects under prefix by their names relative to it.
func (s *slowS3) under(prefix string) map[string][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range s.objects {
		if strings.HasPrefix(k, prefix) {
			out[strings.TrimPrefix(k, prefix)] = v
		}
	}
	return out
}

// textDiff shows the first lines that differ between two text files (""
// for binary files): enough to see why two outputs differ.
func textDiff(a, b string) string {
	x, err1 := os.ReadFile(a)
	y, err2 := os.ReadFile(b)
	if err1 != nil || err2 != nil || !utf8.Valid(x) || !utf8.Valid(y) {
		return ""
	}
	xl, yl := strings.Split(string(x), "\n"), strings.Split(string(y), "\n")
	var out []string
	for i := 0; i < max(len(xl), len(yl)) && len(out) < 6; i++ {
		var l, r string
		if i < len(xl) {
			l = xl[i]
		}
		if i < len(yl) {
			r = yl[i]
		}
		if l != r {
			out = append(out, fmt.Sprintf("line %d: %q ≠ %q", i+1, l, r))
		}
	}
	return ":\n" + strings.Join(out, "\n")
}
