package raster

// #cgo pkg-config: gdal
// #define _LARGEFILE64_SOURCE
// #include <stdlib.h>
// #include <sys/stat.h>
// #include <cpl_vsi.h>
// #include <cpl_error.h>
// #include <cpl_string.h>
// #include <cpl_conv.h>
import "C"

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/lulc/lulc/internal/netwait"
)

// This file is GDAL's virtual file layer as plain files: readers, writers,
// listings and removal on any path GDAL opens (local, /vsimem/, /vsis3/,
// …). Package exchange moves a job's files to and from object storage
// through it, so that a store is reached with the same configuration
// (AWS_S3_ENDPOINT, AWS_* credentials, GDAL_HTTP_*) as the rasters read
// from it.

// anyName runs fn with GDAL's CPL_VSIL_CURL_ALLOWED_EXTENSIONS lifted: the
// ingest sets it process-wide to .tif names (so that opening a COG probes
// no side files over the network), which would hide every other file of a
// job from /vsis3/. It is a process-wide option: a source opened
// meanwhile may probe a side file more, nothing worse.
func anyName[T any](fn func() T) T {
	vsiMu.Lock()
	defer vsiMu.Unlock()
	key := C.CString("CPL_VSIL_CURL_ALLOWED_EXTENSIONS")
	defer C.free(unsafe.Pointer(key))
	var old *C.char
	if v := C.CPLGetConfigOption(key, nil); v != nil {
		old = C.CString(C.GoString(v))
		defer C.free(unsafe.Pointer(old))
	}
	C.CPLSetConfigOption(key, nil)
	defer C.CPLSetConfigOption(key, old)
	return fn()
}

var vsiMu sync.Mutex

// lastError is GDAL's last error message on this thread, cleared, for the
// context of a failed call; empty when GDAL gave none.
func lastError() string {
	msg := C.GoString(C.CPLGetLastErrorMsg())
	C.CPLErrorReset()
	if msg == "" {
		return ""
	}
	return ": " + msg
}

// Exists reports whether a file exists at path (for /vsis3/, an object:
// a HEAD request). A file that cannot be reached counts as missing; Stat
// tells the two apart.
func Exists(path string) bool {
	ok, _ := Stat(path)
	return ok
}

// Stat reports whether a file exists at path. For a network path an
// error means that the server could not say: no answer within the stall
// limit (GDAL_HTTP_LOW_SPEED_TIME), a refused connection, a 403 or a 5xx.
// Only a clean "not found" (404) is false with no error, so that a caller
// never takes an unreachable store for an empty one.
func Stat(path string) (bool, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var st C.VSIStatBufL
	defer netwait.Track(path)()
	type result struct {
		ok  bool
		err error
	}
	r := anyName(func() result {
		// The thread's last error is cleared first: GDAL reports an
		// unanswered or refused HEAD only as a warning left behind, on
		// this thread.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		C.CPLErrorReset()
		if C.VSIStatExL(cpath, &st, C.VSI_STAT_EXISTS_FLAG) == 0 {
			return result{ok: true}
		}
		if C.CPLGetLastErrorType() >= C.CE_Warning {
			if msg := C.GoString(C.CPLGetLastErrorMsg()); msg != "" {
				C.CPLErrorReset()
				return result{err: fmt.Errorf("stat %s: %s%s", path, msg, unanswered(msg))}
			}
		}
		return result{}
	})
	return r.ok, r.err
}

// unanswered explains GDAL's "HTTP response code …: 0": no HTTP answer
// came at all (the stall limit ended the wait, or the connection failed).
func unanswered(msg string) string {
	if strings.HasSuffix(msg, ": 0") {
		return " (no answer: the server did not respond within the stall limit, or could not be reached)"
	}
	return ""
}

// ReadDir lists the names directly under path (for /vsis3/, the objects
// and common prefixes under path/), sorted as GDAL returns them; none
// when path holds nothing.
func ReadDir(path string) []string {
	defer netwait.Track(path)()
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	list := anyName(func() **C.char { return C.VSIReadDir(cpath) })
	defer C.CSLDestroy(list)
	var names []string
	for _, p := range unsafe.Slice(list, int(C.CSLCount(list))) {
		if n := C.GoString(p); n != "." && n != ".." {
			names = append(names, n)
		}
	}
	return names
}

// Remove deletes the file at path; a file that is not there is no error.
func Remove(path string) error {
	ok, err := Stat(path)
	if err != nil {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	if !ok {
		return nil
	}
	defer netwait.Track(path)()
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	if anyName(func() C.int { return C.VSIUnlink(cpath) }) != 0 {
		return fmt.Errorf("remove %s%s", path, lastError())
	}
	return nil
}

// ForgetCached drops what GDAL's network file systems remember of the
// files under prefix (sizes, listings, blocks), so that the next call
// asks the server: another process may have written there since.
func ForgetCached(prefix string) {
	cpath := C.CString(prefix)
	defer C.free(unsafe.Pointer(cpath))
	C.VSICurlPartialClearCache(cpath)
}

// VSIFile is a file opened through GDAL's virtual file layer, read or
// written from the start to the end.
type VSIFile struct {
	path  string
	fp    *C.VSILFILE
	write bool
}

// OpenFile opens path for reading from its start.
func OpenFile(path string) (*VSIFile, error) {
	defer netwait.Track(path)()
	fp := anyName(func() *C.VSILFILE { fp, _ := openVSI(path); return fp })
	if fp == nil {
		return nil, fmt.Errorf("read %s: cannot open%s", path, lastError())
	}
	return &VSIFile{path: path, fp: fp}, nil
}

// CreateFile creates (or replaces) the file at path for writing. On
// /vsis3/ the bytes are uploaded as they come (a multipart upload beyond
// a few MB) and the object appears only when Close succeeds.
func CreateFile(path string) (*VSIFile, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	mode := C.CString("wb")
	defer C.free(unsafe.Pointer(mode))
	defer netwait.Track(path)()
	fp := anyName(func() *C.VSILFILE { return C.VSIFOpenL(cpath, mode) })
	if fp == nil {
		return nil, fmt.Errorf("create %s: cannot open for writing%s", path, lastError())
	}
	return &VSIFile{path: path, fp: fp, write: true}, nil
}

// Read reads up to len(p) bytes (io.Reader).
func (f *VSIFile) Read(p []byte) (int, error) {
	if f.fp == nil {
		return 0, errors.New("read of a closed file")
	}
	if len(p) == 0 {
		return 0, nil
	}
	defer netwait.Track(f.path)()
	n := int(C.VSIFReadL(unsafe.Pointer(&p[0]), 1, C.size_t(len(p)), f.fp))
	if n < len(p) {
		if C.VSIFEofL(f.fp) != 0 {
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		}
		return n, fmt.Errorf("read %s%s", f.path, lastError())
	}
	return n, nil
}

// Write writes p at the end of what was written (io.Writer).
func (f *VSIFile) Write(p []byte) (int, error) {
	if f.fp == nil || !f.write {
		return 0, errors.New("write to a file not open for writing")
	}
	if len(p) == 0 {
		return 0, nil
	}
	defer netwait.Track(f.path)()
	n := int(C.VSIFWriteL(unsafe.Pointer(&p[0]), 1, C.size_t(len(p)), f.fp))
	if n < len(p) {
		return n, fmt.Errorf("write %s%s", f.path, lastError())
	}
	return n, nil
}

// Close closes the file. For a file written, an error means that its
// bytes did not all reach their destination (for /vsis3/: that the
// upload failed and the object was not created).
func (f *VSIFile) Close() error {
	if f.fp == nil {
		return nil
	}
	// Closing a file written to object storage sends its last part and
	// completes the upload: the longest wait of all.
	defer netwait.Track(f.path)()
	rc := C.VSIFCloseL(f.fp)
	f.fp = nil
	if rc != 0 {
		return fmt.Errorf("close %s%s", f.path, lastError())
	}
	return nil
}
