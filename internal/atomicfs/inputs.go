package atomicfs

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// ErrOverlapsInput marks an output refused because writing it would delete,
// replace or write inside one of the command's inputs.
var ErrOverlapsInput = errors.New("output overlaps an input")

// CheckInputs refuses an output path that would touch an input: the output
// is an input, lies inside an input directory, or contains an input (a
// forced replacement would delete it). The staging and backup siblings that
// Begin and Commit use are checked too. Symbolic links are resolved, so a
// link to an input is the input. Inputs that are URLs, GDAL virtual paths,
// empty or missing are skipped: nothing there can be harmed, and the stage
// reports a missing input itself. The error names both paths.
func CheckInputs(out string, inputs ...string) error {
	if out == "" {
		return nil
	}
	o, err := realPath(out)
	if err != nil {
		return fmt.Errorf("output %s: %w", out, err)
	}
	outs := []string{o, StagingDir(o), filepath.Join(filepath.Dir(o), "."+filepath.Base(o)+".old")}
	for _, in := range inputs {
		if !isLocal(in) {
			continue
		}
		i, err := realPath(in)
		if err != nil {
			return fmt.Errorf("input %s: %w", in, err)
		}
		if !Exists(i) {
			continue
		}
		for _, p := range outs {
			switch {
			case p == i:
				return fmt.Errorf("%w: --out %s is the input %s; choose another output directory", ErrOverlapsInput, out, in)
			case within(p, i):
				return fmt.Errorf("%w: --out %s lies inside the input %s; choose an output directory outside it", ErrOverlapsInput, out, in)
			case within(i, p):
				return fmt.Errorf("%w: --out %s contains the input %s, which replacing the output would delete; choose another output directory", ErrOverlapsInput, out, in)
			}
		}
	}
	return nil
}

// within reports whether path lies strictly inside dir (both clean and
// absolute).
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// isLocal reports whether p names a local file rather than a URL or a GDAL
// virtual file system path.
func isLocal(p string) bool {
	if p == "" || strings.HasPrefix(p, "/vsi") {
		return false
	}
	if u, err := url.Parse(p); err == nil && len(u.Scheme) > 1 {
		return u.Scheme == "file"
	}
	return true
}

// realPath makes p absolute and clean and resolves symbolic links in the
// longest prefix of it that exists, so that paths still to be created
// compare with existing ones.
func realPath(p string) (string, error) {
	if u, err := url.Parse(p); err == nil && u.Scheme == "file" {
		p = u.Path
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for cur := abs; ; {
		if _, err := os.Lstat(cur); err == nil {
			real, err := filepath.EvalSymlinks(cur)
			if err != nil {
				return "", err
			}
			return filepath.Join(real, rest), nil
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}
