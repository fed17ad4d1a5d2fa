package catalog

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrHrefRefused is wrapped by every error HrefPolicy.Check returns, so that
// callers can tell a refused href from one that failed to read (errors.Is).
var ErrHrefRefused = errors.New("href refused")

// remoteSchemes are the URL schemes read by default.
var remoteSchemes = []string{"http", "https", "s3", "gs", "az"}

// HrefPolicy decides which hrefs (asset hrefs and, for static catalogs, the
// source/catalog/item links crawled) lulc may read.
//
// By default a local href (a plain path or a file:// URL) must lie under Root
// once made absolute, cleaned and its existing symlinks resolved, and a remote
// href must use http, https, s3, gs or az. Allow widens this.
type HrefPolicy struct {
	// Root is the local directory of a static catalog: local hrefs must lie
	// under it. It is "" when the source is an API or a remote catalog, and
	// then no local href is read unless Allow names it.
	Root string
	// Allow is the widening list of the config key source.allow_hrefs. An
	// entry that contains "://" or starts with "/vsi" is a prefix that hrefs
	// may start with ("ftp://", "https://example.com/data/", "/vsis3/");
	// any other entry is a local directory whose files may be read.
	Allow []string
}

// refusal is the error of a refused href: its message names the href and
// the rule, and it unwraps to ErrHrefRefused.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }
func (r *refusal) Unwrap() error { return ErrHrefRefused }

func refuse(format string, args ...any) error {
	return &refusal{msg: fmt.Sprintf(format, args...)}
}

// Check returns nil when href may be read, else an error wrapping
// ErrHrefRefused that names the href, the rule that refused it and how to
// widen the policy. A relative local href is taken against the working
// directory, as opening it would; ParseItem has already made asset hrefs
// absolute against their item.
func (p HrefPolicy) Check(href string) error {
	if href == "" {
		return refuse(`href "" is empty (an asset or link must name what to read)`)
	}
	prefix, dotted := p.allowedPrefix(href)
	if prefix {
		return nil
	}
	err := p.defaultRule(href)
	if err != nil && dotted != "" {
		// The user widened the policy for this prefix: say why it did not
		// apply rather than repeat the default rule.
		return refuse(`href %q starts with the source.allow_hrefs entry %q but has a ".." segment that could leave it (write the href without ".." to read it)`, href, dotted)
	}
	return err
}

// allowedPrefix reports whether an Allow prefix admits href. dotted is a
// prefix that matched textually but was not honoured because href has a
// ".." segment: "https://h/data/../secret" must not pass "https://h/data/".
func (p HrefPolicy) allowedPrefix(href string) (ok bool, dotted string) {
	for _, e := range p.Allow {
		if !isPrefixEntry(e) || !strings.HasPrefix(href, e) {
			continue
		}
		if hasDotDot(href) {
			dotted = e
			continue
		}
		return true, ""
	}
	return false, dotted
}

func isPrefixEntry(e string) bool {
	return strings.Contains(e, "://") || strings.HasPrefix(e, "/vsi")
}

// hasDotDot reports whether href has a ".." path segment, raw or
// percent-decoded (servers decode "%2e%2e" too).
func hasDotDot(href string) bool {
	forms := []string{href}
	if u, err := url.PathUnescape(href); err == nil && u != href {
		forms = append(forms, u)
	}
	for _, f := range forms {
		segs := strings.FieldsFunc(f, func(r rune) bool { return r == '/' || r == '\\' || r == '?' || r == '#' })
		if slices.Contains(segs, "..") {
			return true
		}
	}
	return false
}

// defaultRule applies the rules that hold without an Allow prefix.
func (p HrefPolicy) defaultRule(href string) error {
	if strings.HasPrefix(href, "/vsi") {
		// GDAL reads these through its virtual file systems (network,
		// archives), whatever the local disk holds: they are not local files.
		return refuse(`href %q is a GDAL virtual file system path (add a prefix such as "/vsis3/" to source.allow_hrefs to read it)`, href)
	}
	switch scheme := schemeOf(href); {
	case scheme == "":
		return p.checkLocal(href, href)
	case scheme == "file":
		u, err := url.Parse(href)
		if err != nil {
			return refuse(`href %q is not a valid file URL (%v)`, href, err)
		}
		if u.Host != "" && u.Host != "localhost" {
			return refuse(`href %q: a file URL on host %s is not a local file (add a prefix to source.allow_hrefs to read it)`, href, u.Host)
		}
		return p.checkLocal(href, filepath.FromSlash(u.Path))
	case slices.Contains(remoteSchemes, scheme):
		return nil
	default:
		return refuse(`href %q: scheme %s is not http, https, s3, gs or az (add a prefix to source.allow_hrefs to read it)`, href, scheme)
	}
}

// schemeOf returns the lower-cased URL scheme of href, or "" for a path. A
// one-letter scheme is a Windows drive ("C:\data"), not a scheme.
func schemeOf(href string) string {
	i := strings.IndexByte(href, ':')
	if i < 2 {
		return ""
	}
	for k, r := range href[:i] {
		letter := 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
		if !letter && (k == 0 || !('0' <= r && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return ""
		}
	}
	return strings.ToLower(href[:i])
}

// checkLocal applies the local rule to path, the file that href names.
func (p HrefPolicy) checkLocal(href, path string) error {
	abs, err := absPath(path)
	if err != nil {
		return refuse(`href %q: cannot make the path absolute (%v)`, href, err)
	}
	resolved := realPath(abs)
	for _, e := range p.Allow {
		if e == "" || isPrefixEntry(e) {
			continue
		}
		if dir, err := absPath(e); err == nil && within(resolved, realPath(filepath.Clean(dir))) {
			return nil
		}
	}
	if p.Root == "" {
		return refuse(`href %q is a local path and the source (a STAC API or remote catalog) has no local directory (add a directory to source.allow_hrefs to read it)`, href)
	}
	root, err := absPath(p.Root)
	if err != nil {
		return refuse(`href %q: cannot make the catalog directory %s absolute (%v)`, href, p.Root, err)
	}
	root = filepath.Clean(root)
	if within(resolved, realPath(root)) {
		return nil
	}
	what := fmt.Sprintf("href %q is", href)
	if resolved != filepath.Clean(abs) {
		what = fmt.Sprintf("href %q resolves to %s,", href, resolved)
	}
	return refuse(`%s outside the catalog directory %s (local hrefs must lie under the catalog's directory; add a directory to source.allow_hrefs to read it)`, what, root)
}

// absPath makes path absolute without cleaning it: "link/../x" must be
// resolved the way the OS will, symlink first, which lexical cleaning
// would get wrong.
func absPath(path string) (string, error) {
	if filepath.IsAbs(path) {
		return path, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	return wd + string(filepath.Separator) + path, nil
}

// realPath resolves the symlinks of an absolute path component by
// component, as opening it would, so that ".." after a symlink leaves the
// symlink's target. Where the path stops existing, the rest is joined
// lexically: nothing there can redirect it yet.
func realPath(abs string) string {
	vol := filepath.VolumeName(abs)
	parts := strings.FieldsFunc(abs[len(vol):], func(r rune) bool { return r == '/' || r == filepath.Separator })
	cur := vol + string(filepath.Separator)
	for i, part := range parts {
		switch part {
		case ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, part)
		fi, err := os.Lstat(next)
		if err != nil {
			return filepath.Join(append([]string{next}, parts[i+1:]...)...)
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		if target, err := filepath.EvalSymlinks(next); err == nil {
			cur = target
			continue
		}
		// A dangling or looping link: judge it by its own target, one
		// level deep, since that is where a later read would land.
		target, err := os.Readlink(next)
		if err != nil {
			return next
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(cur, target)
		}
		return filepath.Join(append([]string{filepath.Clean(target)}, parts[i+1:]...)...)
	}
	return cur
}

// within reports whether path is dir or lies below it; both are clean.
func within(path, dir string) bool {
	if path == dir {
		return true
	}
	if !strings.HasSuffix(dir, string(filepath.Separator)) {
		dir += string(filepath.Separator)
	}
	return strings.HasPrefix(path, dir)
}

// CatalogRoot returns the local directory of a static catalog given as a
// path or file:// URL of its root document, made absolute, or "" when root
// is a remote URL. It is the Root of the HrefPolicy for that catalog.
func CatalogRoot(root string) string {
	path := root
	switch schemeOf(root) {
	case "":
	case "file":
		u, err := url.Parse(root)
		if err != nil {
			return ""
		}
		path = filepath.FromSlash(u.Path)
	default:
		return ""
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	return filepath.Dir(abs)
}
