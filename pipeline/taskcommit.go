package pipeline

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/internal/digest"
	"github.com/lulc/lulc/stage"
)

// TaskCommitFile is a run's commit record, written last into its output
// (after report.json): every file the run wrote, with its size and
// checksum. A rerun of a finished task and lulc collect verify the output
// against it; an output without one is not finished.
const TaskCommitFile = "commit.json"

// TileRecordFile is a mapped tile's record, written into the tile's
// directory once its outputs are complete: what report.json says of the
// tile (its metrics, area of applicability, device) and the checksums of
// its files, so that a resumed run keeps the tile with all it knew of it.
const TileRecordFile = "tile.json"

// FileSum is one file of a commit or tile record: its path, slash
// separated and relative to the record's directory, size and BLAKE3
// checksum (package digest).
type FileSum struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	BLAKE3 string `json:"blake3"`
}

// taskCommit is commit.json.
type taskCommit struct {
	Job   string    `json:"job"` // the job hash report.json holds
	Files []FileSum `json:"files"`
}

// tileRecord is tile.json: the tile as report.json lists it, less its
// stage times (so that a resumed run writes the same bytes as one that
// was not interrupted), and its map's files.
type tileRecord struct {
	RunTile
	Files []FileSum `json:"files"`
}

// sumFiles takes the size and checksum of the files named (relative to
// dir).
func sumFiles(dir string, names []string) ([]FileSum, error) {
	out := make([]FileSum, 0, len(names))
	for _, n := range names {
		sum, size, err := digest.File(filepath.Join(dir, filepath.FromSlash(n)))
		if err != nil {
			return nil, err
		}
		out = append(out, FileSum{Path: n, Size: size, BLAKE3: sum})
	}
	return out, nil
}

// listOutput lists the files of an output directory that a record covers:
// every regular file, slash separated and sorted, except hidden ones
// (staging, spills, temporary files) and the commit record itself. Links
// and other non-regular files are an error: a run writes none.
func listOutput(dir string) ([]string, error) {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is not a regular file (a link or device: no run writes one)", rel)
		case rel != TaskCommitFile:
			names = append(names, rel)
		}
		return nil
	})
	slices.Sort(names)
	return names, err
}

// writeTaskCommit writes dir's commit record for the job: every file
// listOutput finds, checksummed. It is written last, once the output is
// complete.
func writeTaskCommit(dir, job string) error {
	names, err := listOutput(dir)
	if err != nil {
		return fmt.Errorf("commit record: %w", err)
	}
	files, err := sumFiles(dir, names)
	if err != nil {
		return fmt.Errorf("commit record: %w", err)
	}
	body, _ := json.MarshalIndent(taskCommit{Job: job, Files: files}, "", "  ")
	return atomicfs.WriteFile(filepath.Join(dir, TaskCommitFile), append(body, '\n'))
}

// readTaskCommit reads dir's commit record, refusing one that is not
// whole or names a file outside dir.
func readTaskCommit(dir string) (taskCommit, error) {
	var c taskCommit
	path := filepath.Join(dir, TaskCommitFile)
	body, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return c, fmt.Errorf("no commit record (%s): the output is unfinished, or was written by an older lulc", TaskCommitFile)
		}
		return c, err
	}
	if err := json.Unmarshal(body, &c); err != nil {
		return c, fmt.Errorf("%s is not a commit record: %w", TaskCommitFile, err)
	}
	if c.Job == "" || len(c.Files) == 0 {
		return c, fmt.Errorf("%s names no job or no file: not a commit record", TaskCommitFile)
	}
	if err := checkSums(c.Files); err != nil {
		return c, fmt.Errorf("%s: %w", TaskCommitFile, err)
	}
	return c, nil
}

// checkSums refuses a record's list that names a file outside its
// directory, a hidden one, or one twice: the list is read from a file an
// attacker may have written.
func checkSums(files []FileSum) error {
	seen := map[string]bool{}
	for _, f := range files {
		local := filepath.FromSlash(f.Path)
		if f.Path == "" || !filepath.IsLocal(local) || strings.Contains(f.Path, `\`) || filepath.ToSlash(filepath.Clean(local)) != f.Path {
			return fmt.Errorf("file %q lies outside its directory or is not a clean relative path", f.Path)
		}
		if slices.ContainsFunc(strings.Split(f.Path, "/"), func(s string) bool { return strings.HasPrefix(s, ".") }) {
			return fmt.Errorf("file %q is hidden: no record lists one", f.Path)
		}
		if seen[f.Path] {
			return fmt.Errorf("file %q is listed twice", f.Path)
		}
		if len(f.BLAKE3) != 64 || f.Size < 0 {
			return fmt.Errorf("file %q has no %s checksum or a negative size", f.Path, digest.Name)
		}
		seen[f.Path] = true
	}
	return nil
}

// verifySums checks that each file listed exists under dir as a regular
// file of its size and checksum, naming the first that does not.
func verifySums(dir string, files []FileSum) error {
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		info, err := os.Lstat(p)
		switch {
		case err != nil:
			return fmt.Errorf("%s is missing", f.Path)
		case !info.Mode().IsRegular():
			return fmt.Errorf("%s is not a regular file", f.Path)
		case info.Size() != f.Size:
			return fmt.Errorf("%s has %d bytes, its record lists %d (edited or damaged)", f.Path, info.Size(), f.Size)
		}
		sum, _, err := digest.File(p)
		if err != nil {
			return err
		}
		if sum != f.BLAKE3 {
			return fmt.Errorf("%s does not match its recorded checksum (edited or damaged)", f.Path)
		}
	}
	return nil
}

// verifyTask checks an output directory against its commit record, for
// the job: every file listed intact, and no file the record does not list
// (one put there after the run). The error names the file.
func verifyTask(dir string, c taskCommit, job string) error {
	if c.Job != job {
		return fmt.Errorf("%s is of job %.12s, report.json of %.12s (one of them was swapped in)", TaskCommitFile, c.Job, job)
	}
	names, err := listOutput(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if !slices.ContainsFunc(c.Files, func(f FileSum) bool { return f.Path == n }) {
			return fmt.Errorf("%s is not in the commit record: not written by the task", n)
		}
	}
	return verifySums(dir, c.Files)
}

// lists reports whether the commit record lists the file (slash
// separated, relative to the output).
func (c taskCommit) lists(path string) bool {
	return slices.ContainsFunc(c.Files, func(f FileSum) bool { return f.Path == path })
}

// writeTileRecord writes a mapped tile's record once its map's files are
// complete: rt without its stage times, and the checksums of the files
// the map wrote into dir.
func writeTileRecord(dir string, rt RunTile) error {
	var names []string
	for _, f := range []string{stage.ClassFile, stage.ClassNamesFile, stage.StyleFile, stage.ConfidenceFile, stage.AOAFile, stage.QuicklookFile, stage.ItemFile, stage.RunMetricsFile} {
		if atomicfs.Exists(filepath.Join(dir, f)) {
			names = append(names, f)
		}
	}
	files, err := sumFiles(dir, names)
	if err != nil {
		return fmt.Errorf("tile record: %w", err)
	}
	rec := tileRecord{RunTile: RunTile{Tile: rt.Tile, Dates: rt.Dates, Pixels: rt.Pixels, Device: rt.Device, Metrics: rt.Metrics,
		Radiometry: rt.Radiometry, AOAOutside: rt.AOAOutside, AOAWarning: rt.AOAWarning, Outside: rt.Outside}, Files: files}
	body, _ := json.MarshalIndent(rec, "", "  ")
	return atomicfs.WriteFile(filepath.Join(dir, TileRecordFile), append(body, '\n'))
}

// keptTile reads a tile's record in dir and verifies its files: the tile
// as the run that mapped it reported it, or an error naming what is
// missing or differs.
func keptTile(dir, tile string) (RunTile, error) {
	body, err := os.ReadFile(filepath.Join(dir, TileRecordFile))
	if err != nil {
		return RunTile{}, fmt.Errorf("no tile record (%s)", TileRecordFile)
	}
	var rec tileRecord
	if err := json.Unmarshal(body, &rec); err != nil {
		return RunTile{}, fmt.Errorf("%s: %w", TileRecordFile, err)
	}
	if rec.Tile != tile {
		return RunTile{}, fmt.Errorf("%s records tile %q", TileRecordFile, rec.Tile)
	}
	if err := checkSums(rec.Files); err != nil {
		return RunTile{}, fmt.Errorf("%s: %w", TileRecordFile, err)
	}
	for _, f := range []string{stage.ClassFile, stage.ItemFile} {
		if !slices.ContainsFunc(rec.Files, func(s FileSum) bool { return s.Path == f }) {
			return RunTile{}, fmt.Errorf("%s lists no %s", TileRecordFile, f)
		}
	}
	if err := verifySums(dir, rec.Files); err != nil {
		return RunTile{}, err
	}
	rec.RunTile.Seconds = map[string]float64{}
	return rec.RunTile, nil
}

// stackKept reports whether a tile's stack (outputs.stack) is complete
// and matches the checksums its manifest records.
func stackKept(dir string) bool {
	body, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return false
	}
	var m struct {
		Outputs []stage.ManifestOutput `json:"outputs"`
	}
	if json.Unmarshal(body, &m) != nil || len(m.Outputs) == 0 {
		return false
	}
	for _, o := range m.Outputs {
		if !filepath.IsLocal(o.File) || !digest.Matches(filepath.Join(dir, o.File), o.Multihash()) {
			return false
		}
	}
	return true
}
