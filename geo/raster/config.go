package raster

// #cgo pkg-config: gdal
// #include <stdlib.h>
// #include <cpl_conv.h>
import "C"

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"time"
	"unsafe"
)

// SetConfig sets GDAL configuration options process-wide (GDAL_HTTP_*,
// AWS_NO_SIGN_REQUEST, GDAL_DISABLE_READDIR_ON_OPEN, …). They must be
// global rather than per call: /vsicurl/ and /vsis3/ read them when they
// fetch blocks, on whichever thread does so.
func SetConfig(options map[string]string) error {
	for k, v := range options {
		if k == "" || strings.ContainsAny(k, "= ") {
			return fmt.Errorf("gdal option %q: not a configuration key", k)
		}
		ck, cv := C.CString(k), C.CString(v)
		C.CPLSetConfigOption(ck, cv)
		C.free(unsafe.Pointer(ck))
		C.free(unsafe.Pointer(cv))
	}
	return nil
}

// withThreadConfig runs f with a GDAL configuration option set for the
// calling thread only (the goroutine is locked to it meanwhile): for an
// option that must hold across several GDAL calls, such as one read when
// a dataset is closed, without touching other threads' GDAL work.
func withThreadConfig(key, value string, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ck, cv := C.CString(key), C.CString(value)
	defer C.free(unsafe.Pointer(ck))
	defer C.free(unsafe.Pointer(cv))
	C.CPLSetThreadLocalConfigOption(ck, cv)
	defer C.CPLSetThreadLocalConfigOption(ck, nil)
	return f()
}

// StallOptions are the GDAL options that end a network transfer (of
// /vsicurl/, /vsis3/ and the other network file systems, reads and
// uploads alike) once it has gone limit without progress: no connection
// within limit, or less than one byte a second over limit. GDAL counts in
// whole seconds, so limit is rounded up. GDAL may send a few requests for
// one file (a HEAD, then a range), each bounded so.
func StallOptions(limit time.Duration) map[string]string {
	s := fmt.Sprint(int(math.Ceil(limit.Seconds())))
	return map[string]string{
		"GDAL_HTTP_CONNECTTIMEOUT":  s,
		"GDAL_HTTP_LOW_SPEED_TIME":  s,
		"GDAL_HTTP_LOW_SPEED_LIMIT": "1",
	}
}
