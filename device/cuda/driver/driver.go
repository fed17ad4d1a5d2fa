// Package driver binds the CUDA driver API, loaded at run time with
// purego (no cgo, no CUDA toolkit at build time: the package builds with
// CGO_ENABLED=0 and only the driver's libcuda is needed to run). It knows
// nothing of lulc's kernels: package cuda loads them (LoadModule) and
// drives them through it.
//
// A Device is owned by one goroutine locked to its OS thread, which holds
// the device's primary context; work is handed to it (Do), so any number
// of goroutines may use a Device, and N GPUs mean N owners. Work that
// others wait on may go first (DoFirst), and large copies from the host go
// on a second thread with the context current (the copier, CopyAside),
// through pinned staging buffers, while the owner goes on. Device memory
// is a Buffer; a Pool keeps buffers for reuse across calls. Functions
// that touch the device without a Device's method (Alloc, Upload, the
// streams and pinned host memory, …) run where a context is current: on
// the owner goroutine, inside Do.
package driver

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Result is a CUDA driver error code; it implements error with the
// driver's own name and description.
type Result int32

// Codes callers test for.
const (
	Success             Result = 0
	ErrorOutOfMemory    Result = 2
	ErrorNoDevice       Result = 100
	ErrorUnsupportedPTX Result = 222
)

// Error returns the code with the driver's name and description of it.
func (r Result) Error() string {
	name, desc := "CUDA_ERROR_UNKNOWN", ""
	if api.getErrorName != nil {
		var p, q *byte
		api.getErrorName(int32(r), &p)
		api.getErrorString(int32(r), &q)
		name, desc = cString(p), cString(q)
	}
	return fmt.Sprintf("%s (%d): %s", name, int32(r), desc)
}

func cString(p *byte) string {
	if p == nil {
		return ""
	}
	var b []byte
	for q := unsafe.Pointer(p); *(*byte)(q) != 0; q = unsafe.Add(q, 1) {
		b = append(b, *(*byte)(q))
	}
	return string(b)
}

func check(r int32, what string) error {
	if r == 0 {
		return nil
	}
	return fmt.Errorf("%s: %w", what, Result(r))
}

// api holds the driver entry points, by their real (versioned) names.
var api struct {
	init             func(flags uint32) int32
	driverGetVersion func(v *int32) int32
	deviceGetCount   func(n *int32) int32
	deviceGet        func(d *int32, ordinal int32) int32
	deviceGetName    func(name *byte, n int32, d int32) int32
	deviceTotalMem   func(bytes *uint64, d int32) int32
	deviceGetAttr    func(v *int32, attr int32, d int32) int32
	primaryRetain    func(ctx *uintptr, d int32) int32
	primarySetFlags  func(d int32, flags uint32) int32
	ctxSetCurrent    func(ctx uintptr) int32
	ctxSynchronize   func() int32
	moduleLoadDataEx func(m *uintptr, image unsafe.Pointer, n uint32, opts *int32, vals *uintptr) int32
	moduleGetFunc    func(f *uintptr, m uintptr, name *byte) int32
	funcSetAttr      func(f uintptr, attr int32, v int32) int32
	memAlloc         func(p *uint64, bytes uint64) int32
	memFree          func(p uint64) int32
	memAllocHost     func(p *unsafe.Pointer, bytes uint64) int32
	memFreeHost      func(p unsafe.Pointer) int32
	memcpyHtoD       func(dst uint64, src unsafe.Pointer, n uint64) int32
	memcpyDtoH       func(dst unsafe.Pointer, src uint64, n uint64) int32
	memcpyDtoD       func(dst, src uint64, n uint64) int32
	launchKernel     func(f uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params unsafe.Pointer, extra unsafe.Pointer) int32
	eventCreate      func(e *uintptr, flags uint32) int32
	eventRecord      func(e uintptr, stream uintptr) int32
	eventSynchronize func(e uintptr) int32
	eventElapsed     func(ms *float32, start, end uintptr) int32
	eventDestroy     func(e uintptr) int32
	streamCreate     func(s *uintptr, flags uint32) int32
	streamSync       func(s uintptr) int32
	streamDestroy    func(s uintptr) int32
	streamWaitEvent  func(s uintptr, e uintptr, flags uint32) int32
	memcpyHtoDAsync  func(dst uint64, src unsafe.Pointer, n uint64, s uintptr) int32
	memcpyDtoHAsync  func(dst unsafe.Pointer, src uint64, n uint64, s uintptr) int32
	memsetD32        func(dst uint64, v uint32, n uint64) int32
	memsetD32Async   func(dst uint64, v uint32, n uint64, s uintptr) int32
	memGetInfo       func(free, total *uint64) int32
	getErrorName     func(r int32, s **byte) int32
	getErrorString   func(r int32, s **byte) int32
}

var (
	loadOnce sync.Once
	loadErr  error
)

// Load opens libcuda and initialises the driver. It is safe to call often;
// the error says why no GPU can be used (no driver library, no device, …).
func Load() error {
	loadOnce.Do(func() { loadErr = load() })
	return loadErr
}

func load() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("the CUDA driver is loaded on Linux only (this is %s)", runtime.GOOS)
	}
	var lib uintptr
	var err error
	for _, name := range []string{"libcuda.so.1", "libcuda.so"} {
		if lib, err = purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("no NVIDIA driver: cannot load libcuda.so.1: %w", err)
	}
	syms := []struct {
		fn   any
		name string
	}{
		{&api.getErrorName, "cuGetErrorName"}, {&api.getErrorString, "cuGetErrorString"},
		{&api.init, "cuInit"}, {&api.driverGetVersion, "cuDriverGetVersion"},
		{&api.deviceGetCount, "cuDeviceGetCount"}, {&api.deviceGet, "cuDeviceGet"},
		{&api.deviceGetName, "cuDeviceGetName"}, {&api.deviceTotalMem, "cuDeviceTotalMem_v2"},
		{&api.deviceGetAttr, "cuDeviceGetAttribute"}, {&api.primaryRetain, "cuDevicePrimaryCtxRetain"},
		{&api.primarySetFlags, "cuDevicePrimaryCtxSetFlags_v2"},
		{&api.ctxSetCurrent, "cuCtxSetCurrent"}, {&api.ctxSynchronize, "cuCtxSynchronize"},
		{&api.moduleLoadDataEx, "cuModuleLoadDataEx"}, {&api.moduleGetFunc, "cuModuleGetFunction"},
		{&api.funcSetAttr, "cuFuncSetAttribute"},
		{&api.memAlloc, "cuMemAlloc_v2"}, {&api.memFree, "cuMemFree_v2"},
		{&api.memAllocHost, "cuMemAllocHost_v2"}, {&api.memFreeHost, "cuMemFreeHost"},
		{&api.memcpyHtoD, "cuMemcpyHtoD_v2"}, {&api.memcpyDtoH, "cuMemcpyDtoH_v2"}, {&api.memcpyDtoD, "cuMemcpyDtoD_v2"},
		{&api.launchKernel, "cuLaunchKernel"},
		{&api.eventCreate, "cuEventCreate"}, {&api.eventRecord, "cuEventRecord"},
		{&api.eventSynchronize, "cuEventSynchronize"}, {&api.eventElapsed, "cuEventElapsedTime"},
		{&api.eventDestroy, "cuEventDestroy_v2"},
		{&api.streamCreate, "cuStreamCreate"}, {&api.streamSync, "cuStreamSynchronize"},
		{&api.streamDestroy, "cuStreamDestroy_v2"}, {&api.streamWaitEvent, "cuStreamWaitEvent"},
		{&api.memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"}, {&api.memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"},
		{&api.memsetD32, "cuMemsetD32_v2"}, {&api.memsetD32Async, "cuMemsetD32Async"}, {&api.memGetInfo, "cuMemGetInfo_v2"},
	}
	for _, s := range syms {
		// RegisterLibFunc panics on a missing symbol: look it up first.
		addr, err := purego.Dlsym(lib, s.name)
		if err != nil {
			return fmt.Errorf("libcuda lacks %s (driver too old?): %w", s.name, err)
		}
		purego.RegisterFunc(s.fn, addr)
	}
	if err := check(api.init(0), "cuInit"); err != nil {
		return err
	}
	return nil
}

// DriverVersion returns the driver's CUDA version as "13.0".
func DriverVersion() (string, error) {
	if err := Load(); err != nil {
		return "", err
	}
	var v int32
	if err := check(api.driverGetVersion(&v), "cuDriverGetVersion"); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10), nil
}

// Info describes a device.
type Info struct {
	Index        int
	Name         string
	Memory       uint64 // bytes
	Major, Minor int    // compute capability
	SMs          int
}

// Devices lists the GPUs the driver sees.
func Devices() ([]Info, error) {
	if err := Load(); err != nil {
		return nil, err
	}
	var n int32
	if err := check(api.deviceGetCount(&n), "cuDeviceGetCount"); err != nil {
		return nil, err
	}
	var out []Info
	for i := range n {
		var d int32
		if err := check(api.deviceGet(&d, i), "cuDeviceGet"); err != nil {
			return nil, err
		}
		name := make([]byte, 256)
		api.deviceGetName(&name[0], int32(len(name)), d)
		var mem uint64
		api.deviceTotalMem(&mem, d)
		var major, minor, sms int32
		api.deviceGetAttr(&major, 75, d) // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
		api.deviceGetAttr(&minor, 76, d) // …_MINOR
		api.deviceGetAttr(&sms, 16, d)   // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
		out = append(out, Info{Index: int(i), Name: cString(&name[0]), Memory: mem, Major: int(major), Minor: int(minor), SMs: int(sms)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CUDA device: %w", ErrorNoDevice)
	}
	return out, nil
}
