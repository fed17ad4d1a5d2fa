package atomicfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"
)

// ErrBadName marks a name from data (a tile id, a plan's tile, a raster
// pair's tile) refused as a path component by CheckName.
var ErrBadName = errors.New("not a usable file name")

// maxName is the longest file name Linux and macOS file systems take
// (NAME_MAX, in bytes).
const maxName = 255

// CheckName refuses a name that is to become one component of a path but
// could not be one, or would lead elsewhere: empty, "." or "..", holding a
// path separator (/ or \), a control character (NUL, newline, ESC …) or
// an invisible formatting character (a right-to-left override that makes
// the name read as another), not UTF-8, or longer than 255 bytes. Names
// come from data (catalogs, plans, configs) that an attacker may write,
// so every such name passes here before it is joined to an output
// directory. The error wraps ErrBadName, quotes the name and says why.
func CheckName(name string) error {
	why := ""
	switch {
	case name == "":
		why = "it is empty"
	case name == "." || name == "..":
		why = "it names a directory itself, not an entry in it"
	case strings.ContainsAny(name, `/\`):
		why = "it holds a path separator (/ or \\)"
	case !utf8.ValidString(name):
		why = "it is not UTF-8"
	case len(name) > maxName:
		why = fmt.Sprintf("it is %d bytes long, longer than the %d a file name may be", len(name), maxName)
	default:
		for _, r := range name {
			if unicode.IsControl(r) {
				why = fmt.Sprintf("it holds the control character %U", r)
				break
			}
			if unicode.Is(unicode.Cf, r) {
				why = fmt.Sprintf("it holds the invisible formatting character %U", r)
				break
			}
		}
	}
	if why == "" {
		return nil
	}
	return fmt.Errorf("%w: %q: %s", ErrBadName, name, why)
}

// CheckWithin refuses a path that does not lie strictly inside root once
// both are made absolute and their existing parts have their symbolic
// links resolved: the last check before a write, so that a name that
// slipped past CheckName, or a link planted in a resumed staging
// directory, cannot carry the write out of the output.
func CheckWithin(root, path string) error {
	r, err := realPath(root)
	if err != nil {
		return fmt.Errorf("output %s: %w", root, err)
	}
	p, err := realPath(path)
	if err != nil {
		return fmt.Errorf("output %s: %w", path, err)
	}
	if !within(p, r) {
		return fmt.Errorf("%s lies outside the output %s: refused", path, root)
	}
	return nil
}

// Entry returns the path of name inside dir after checking name with
// CheckName and the path with CheckWithin.
func Entry(dir, name string) (string, error) {
	if err := CheckName(name); err != nil {
		return "", err
	}
	p := filepath.Join(dir, name)
	if err := CheckWithin(dir, p); err != nil {
		return "", err
	}
	return p, nil
}

// CheckTarget checks what lies at an output path before anything is
// written there: nothing, or a regular file (dir false) or a directory
// (dir true) that force allows to replace. A symbolic link, a device
// node, a FIFO, a socket, or a directory where a file goes (and the
// reverse) is refused even with force: replacing it would not do what the
// user meant (a device replaced by a file, a link's target left alone or
// written through). The error names the path and what it is.
func CheckTarget(path string, dir, force bool) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		// Nothing there (a parent that is a file is the writer's to
		// report: it cannot create the output).
		return nil
	}
	if err != nil {
		return fmt.Errorf("output %s: %w", path, err)
	}
	want := "a regular file"
	if dir {
		want = "a directory"
	}
	m := fi.Mode()
	switch {
	case m&fs.ModeSymlink != 0:
		to, _ := os.Readlink(path)
		return fmt.Errorf("output %s is a symbolic link (to %s): lulc replaces only %s it wrote; give the real path or another one", path, to, want)
	case dir && !m.IsDir(), !dir && !m.IsRegular():
		return fmt.Errorf("output %s is %s, not %s: lulc never replaces it; choose another output", path, kind(m), want)
	case !force:
		return fmt.Errorf("output %s already exists (use --force to replace it)", path)
	}
	return nil
}

// kind names a file mode's type for messages.
func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m.IsRegular():
		return "a regular file"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO (named pipe)"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file (" + m.Type().String() + ")"
}
