package raster

// #cgo pkg-config: gdal
// #include <stdlib.h>
// #include <cpl_conv.h>
import "C"

import (
	"fmt"
	"strings"
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
