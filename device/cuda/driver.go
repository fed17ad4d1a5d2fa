// Package cuda drives NVIDIA GPUs through the CUDA driver API, loaded at run
// time with purego (no cgo, no CUDA toolkit at build time: the package
// builds with CGO_ENABLED=0 and only the driver's libcuda is needed to run).
// It holds the GPU twins of lulc's compute stages, each behind the same
// interface as its CPU reference and tested against it bit for bit,
// decoding of compressed GeoTIFF tiles (package decode's twin) and the
// two passes of package sampling's draw over a tile kept in device memory
// (Mirror) included.
//
// A Device is owned by one goroutine locked to its OS thread, which holds
// the device's primary context; work is handed to it, so any number of
// goroutines may use a Device, and N GPUs mean N owners. Work that others
// wait on may go first (doFirst), and large copies from the host go on a
// second thread with the context current (the copier), through pinned
// staging buffers, while the owner goes on.
package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
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
	ctxSetCurrent    func(ctx uintptr) int32
	ctxSynchronize   func() int32
	moduleLoadDataEx func(m *uintptr, image unsafe.Pointer, n uint32, opts *int32, vals *uintptr) int32
	moduleGetFunc    func(f *uintptr, m uintptr, name *byte) int32
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
	memcpyHtoDAsync  func(dst uint64, src unsafe.Pointer, n uint64, s uintptr) int32
	memcpyDtoHAsync  func(dst unsafe.Pointer, src uint64, n uint64, s uintptr) int32
	memsetD32        func(dst uint64, v uint32, n uint64) int32
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
		{&api.ctxSetCurrent, "cuCtxSetCurrent"}, {&api.ctxSynchronize, "cuCtxSynchronize"},
		{&api.moduleLoadDataEx, "cuModuleLoadDataEx"}, {&api.moduleGetFunc, "cuModuleGetFunction"},
		{&api.memAlloc, "cuMemAlloc_v2"}, {&api.memFree, "cuMemFree_v2"},
		{&api.memAllocHost, "cuMemAllocHost_v2"}, {&api.memFreeHost, "cuMemFreeHost"},
		{&api.memcpyHtoD, "cuMemcpyHtoD_v2"}, {&api.memcpyDtoH, "cuMemcpyDtoH_v2"}, {&api.memcpyDtoD, "cuMemcpyDtoD_v2"},
		{&api.launchKernel, "cuLaunchKernel"},
		{&api.eventCreate, "cuEventCreate"}, {&api.eventRecord, "cuEventRecord"},
		{&api.eventSynchronize, "cuEventSynchronize"}, {&api.eventElapsed, "cuEventElapsedTime"},
		{&api.eventDestroy, "cuEventDestroy_v2"},
		{&api.streamCreate, "cuStreamCreate"}, {&api.streamSync, "cuStreamSynchronize"},
		{&api.streamDestroy, "cuStreamDestroy_v2"},
		{&api.memcpyHtoDAsync, "cuMemcpyHtoDAsync_v2"}, {&api.memcpyDtoHAsync, "cuMemcpyDtoHAsync_v2"},
		{&api.memsetD32, "cuMemsetD32_v2"}, {&api.memGetInfo, "cuMemGetInfo_v2"},
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

// Device is one GPU with its primary context, owned by a goroutine.
type Device struct {
	Info
	work chan func()
	// first carries work that goes before any waiting in work: the
	// decoding of a row read ahead, which every window of that row waits
	// for, goes before the windows' own calls.
	first  chan func()
	module uintptr
	funcs  map[string]uintptr
	params unsafe.Pointer // pinned host memory for kernel arguments
	closed bool
	busy   atomic.Int64 // ns spent running work on the owner goroutine
	// mem is the device's memory pool for the per-call twins (composite,
	// median, binning): a window's buffers are reused by the next window
	// instead of being allocated and freed each time.
	mem pool
	// tiles keeps decoded source tiles between windows (decodeRects);
	// tileCall counts its calls.
	tiles    *tileCache
	tileCall uint64
	// held is where the compressed tiles that DecodeAhead keeps lie, by
	// TileKey, until ReleaseAhead (owner goroutine only).
	held     map[string]heldTile
	heldBufs map[*heldBuffer]bool
	ctx      uintptr // the primary context
	// copier is a second goroutine locked to its own OS thread with the
	// context current, started on first use (Aside): it makes copies from
	// pageable host memory, which hold their calling thread for as long
	// as the bytes take to stage, while the owner goes on launching work.
	copier     chan func()
	copyStream uintptr // non-blocking: its copies overlap the owner's kernels
	copyOnce   sync.Once
	copyErr    error
	stage      *stager // the copier's pinned staging, made on first use
	// ahead serialises DecodeAhead calls (one reader per lane, and lanes
	// may share a device): they share the device buffers of a row.
	ahead sync.Mutex
	opt   Options
}

// kernels returns the PTX the device loads.
func (d *Device) kernels() string {
	if d.opt.PTX != "" {
		return d.opt.PTX
	}
	return ptx
}

// Options are a device's settings for comparing ways of working on one
// machine; the zero value is lulc's way. The command line sets them from
// the environment (docs/gpu.md); library code never reads it.
type Options struct {
	// PTX, when set, is the kernels to load instead of the embedded ones
	// (freshly compiled kernels tried on a GPU host before they are
	// committed).
	PTX string
	// Pageable copies the rows decoded ahead straight from the host's
	// pageable memory instead of through the pinned staging.
	Pageable bool
	// TrainProfile has forest training wait for its kernels group by
	// group and log where the time went.
	TrainProfile bool

	// This package's tests lower these to run the chunked and batched
	// paths on small inputs (0: lulc's sizes): pixels per chunk of
	// prediction and of features, trees grown at once.
	predictChunk, featureChunk, maxBatch int
}

// Open retains device index's primary context on a new owner goroutine
// and loads lulc's kernels (opt.PTX's, when set).
func Open(index int, opt Options) (*Device, error) {
	devs, err := Devices()
	if err != nil {
		return nil, err
	}
	if index < 0 || index >= len(devs) {
		return nil, fmt.Errorf("no GPU %d (the driver sees %d)", index, len(devs))
	}
	d := &Device{Info: devs[index], opt: opt, work: make(chan func()), first: make(chan func()), funcs: map[string]uintptr{}, mem: pool{},
		held: map[string]heldTile{}, heldBufs: map[*heldBuffer]bool{}}
	ready := make(chan error)
	go d.own(ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return d, nil
}

// own is the device-owning goroutine.
func (d *Device) own(ready chan<- error) {
	runtime.LockOSThread()
	var cu int32
	var ctx uintptr
	err := check(api.deviceGet(&cu, int32(d.Index)), "cuDeviceGet")
	if err == nil {
		err = check(api.primaryRetain(&ctx, cu), "cuDevicePrimaryCtxRetain")
	}
	if err == nil {
		err = check(api.ctxSetCurrent(ctx), "cuCtxSetCurrent")
	}
	d.ctx = ctx
	if err == nil {
		err = check(api.memAllocHost(&d.params, 4096), "cuMemAllocHost")
	}
	if err == nil {
		err = d.loadModule()
	}
	ready <- err
	if err == nil {
	loop:
		for {
			select {
			case f := <-d.first:
				f()
				continue
			default:
			}
			select {
			case f := <-d.first:
				f()
			case f, ok := <-d.work:
				if !ok {
					break loop
				}
				f()
			}
		}
	}
	// Park the goroutine instead of returning: a locked goroutine that
	// exits takes its OS thread down, and the driver's per-thread state
	// torn down that way crashed lulc at exit (seen on an H100, driver
	// 580, with GDAL linked). The parked thread dies with the process.
	select {}
}

// Do runs f on the owner goroutine, where the context is current.
func (d *Device) Do(f func() error) error { return d.do(d.work, f) }

// doFirst is Do ahead of the calls waiting in Do.
func (d *Device) doFirst(f func() error) error { return d.do(d.first, f) }

func (d *Device) do(queue chan func(), f func() error) error {
	if d.closed {
		return errors.New("cuda: device closed")
	}
	done := make(chan error)
	queue <- func() {
		t0 := time.Now()
		err := f()
		d.busy.Add(int64(time.Since(t0)))
		done <- err
	}
	return <-done
}

// aside runs f on the copier goroutine (see Device.copier), which it
// starts on first use, and waits for it. f may use d.copyStream and no
// other state of the owner's: the owner runs meanwhile.
func (d *Device) aside(f func() error) error {
	if d.closed {
		return errors.New("cuda: device closed")
	}
	d.copyOnce.Do(func() {
		d.copier = make(chan func())
		ready := make(chan error)
		go func() {
			runtime.LockOSThread()
			err := check(api.ctxSetCurrent(d.ctx), "cuCtxSetCurrent")
			if err == nil {
				// CU_STREAM_NON_BLOCKING: no implicit ordering with the
				// owner's work on the legacy default stream.
				err = check(api.streamCreate(&d.copyStream, 1), "cuStreamCreate")
			}
			ready <- err
			if err == nil {
				for f := range d.copier {
					f()
				}
			}
			select {} // parked, as the owner is (see own)
		}()
		d.copyErr = <-ready
	})
	if d.copyErr != nil {
		return d.copyErr
	}
	// Not counted in Busy: the copier's time overlaps the owner's.
	done := make(chan error)
	d.copier <- func() { done <- f() }
	return <-done
}

// Busy returns the time the owner goroutine has spent running work: the
// GPU's transfers and kernels and the host staging around them. Against a
// command's wall time it says how busy the device was kept.
func (d *Device) Busy() time.Duration { return time.Duration(d.busy.Load()) }

// Close releases the device; closing a nil Device (the CPU) does nothing.
func (d *Device) Close() {
	if d != nil && !d.closed {
		d.Do(func() error {
			d.mem.release()
			d.tiles.release()
			for h := range d.heldBufs {
				h.buf.free()
			}
			api.memFreeHost(d.params)
			if d.stage != nil {
				d.stage.free()
			}
			if d.copyStream != 0 {
				api.streamDestroy(d.copyStream)
			}
			return nil
		})
		d.closed = true
		close(d.work)
		if d.copier != nil {
			close(d.copier)
		}
	}
}

// loadModule JIT-compiles the embedded PTX, with the JIT's error log in
// the error when it fails.
func (d *Device) loadModule() error {
	ptx := append([]byte(d.kernels()), 0)
	logBuf := make([]byte, 8192)
	// CU_JIT_ERROR_LOG_BUFFER (5) and its size (6).
	opts := []int32{5, 6}
	vals := []uintptr{uintptr(unsafe.Pointer(&logBuf[0])), uintptr(len(logBuf))}
	r := api.moduleLoadDataEx(&d.module, unsafe.Pointer(&ptx[0]), 2, &opts[0], &vals[0])
	runtime.KeepAlive(ptx)
	runtime.KeepAlive(logBuf)
	if r != 0 {
		return fmt.Errorf("load lulc kernels (PTX %s): %w: %s", ptxVersion(d.kernels()), Result(r), cString(&logBuf[0]))
	}
	for _, name := range []string{"features", "features_wide", "reflectance", "context_rows", "context_cols", "features_context", "context_at", "crop", "median", "bin", "forest_predict", "rf_boot", "rf_root", "rf_hist", "rf_split", "rf_split_tiny", "rf_partition", "composite", "upsample_bilinear", "inflate", "tiff_unpack", "gather_tiles",
		"draw_count", "draw_collect", "place_u16", "place_u8", "aoa_di"} {
		var f uintptr
		cname := append([]byte(name), 0)
		if err := check(api.moduleGetFunc(&f, d.module, &cname[0]), "cuModuleGetFunction "+name); err != nil {
			return err
		}
		d.funcs[name] = f
	}
	return nil
}

// Buffer is device memory.
type Buffer struct {
	ptr   uint64
	bytes uint64
}

// alloc allocates device memory (on the owner goroutine).
func alloc(bytes uint64) (Buffer, error) {
	var p uint64
	if err := check(api.memAlloc(&p, max(bytes, 1)), fmt.Sprintf("cuMemAlloc %d bytes", bytes)); err != nil {
		return Buffer{}, err
	}
	now := held.Add(int64(max(bytes, 1)))
	for {
		top := peak.Load()
		if now <= top || peak.CompareAndSwap(top, now) {
			break
		}
	}
	return Buffer{p, bytes}, nil
}

func (b Buffer) free() {
	api.memFree(b.ptr)
	held.Add(-int64(max(b.bytes, 1)))
}

// held and peak count the device memory lulc's allocations hold, over all
// devices: now, and at most since ResetPeakMemory.
var held, peak atomic.Int64

// DeviceMemory returns the device memory lulc's own allocations hold now
// and the most they held since the last ResetPeakMemory, in bytes. The
// driver's per-context memory (a few hundred MB) is not included.
func DeviceMemory() (now, most uint64) { return uint64(held.Load()), uint64(peak.Load()) }

// ResetPeakMemory starts a new peak from what is held now.
func ResetPeakMemory() { peak.Store(held.Load()) }

// upload copies a Go slice's bytes to a new device buffer.
func upload[T any](s []T) (Buffer, error) {
	n := uint64(len(s)) * uint64(unsafe.Sizeof(*new(T)))
	b, err := alloc(n)
	if err != nil || n == 0 {
		return b, err
	}
	if err := check(api.memcpyHtoD(b.ptr, unsafe.Pointer(&s[0]), n), "cuMemcpyHtoD"); err != nil {
		b.free()
		return Buffer{}, err
	}
	return b, nil
}

// putAt copies a Go slice's bytes to device address ptr (inside a buffer
// the caller sized).
func putAt[T any](ptr uint64, s []T) error {
	n := uint64(len(s)) * uint64(unsafe.Sizeof(*new(T)))
	if n == 0 {
		return nil
	}
	return check(api.memcpyHtoD(ptr, unsafe.Pointer(&s[0]), n), "cuMemcpyHtoD")
}

// download copies a device buffer into a Go slice.
func download[T any](s []T, b Buffer) error {
	n := uint64(len(s)) * uint64(unsafe.Sizeof(*new(T)))
	if n == 0 {
		return nil
	}
	return check(api.memcpyDtoH(unsafe.Pointer(&s[0]), b.ptr, n), "cuMemcpyDtoH")
}

// launchAsync queues kernel name over n elements on stream (no wait).
func (d *Device) launchAsync(stream uintptr, name string, n int64, args ...any) error {
	return d.launchOn(stream, false, name, n, args...)
}

// launch runs kernel name over n elements with the arguments (each a
// uint64 device pointer, int32 or int64), then synchronises and reports
// any launch or execution error. Arguments are staged in pinned host
// memory, since the driver reads them through pointers.
func (d *Device) launch(name string, n int64, args ...any) error {
	return d.launchOn(0, true, name, n, args...)
}

func (d *Device) launchOn(stream uintptr, wait bool, name string, n int64, args ...any) error {
	block := int64(256)
	if name == "forest_predict" {
		block = 128 // its shared-memory row buffer is sized for 128 threads
	}
	grid := uint32(min((n+block-1)/block, int64(d.SMs*32)))
	if grid == 0 {
		grid = 1
	}
	if err := d.launchGrid(stream, name, grid, 1, uint32(block), 0, args...); err != nil {
		return err
	}
	if !wait {
		return nil
	}
	return check(api.ctxSynchronize(), "run "+name)
}

// launchGrid queues kernel name on a gx × gy grid of blocks of block
// threads with shared bytes of dynamic shared memory. Arguments (each a
// uint64 device pointer, int32, int64 or float32) are staged in pinned host
// memory, since the driver reads them through pointers.
func (d *Device) launchGrid(stream uintptr, name string, gx, gy, block, shared uint32, args ...any) error {
	return d.launchGrid3(stream, name, [3]uint32{gx, gy, 1}, block, shared, args...)
}

// launchGrid3 is launchGrid on a grid of three dimensions.
func (d *Device) launchGrid3(stream uintptr, name string, grid [3]uint32, block, shared uint32, args ...any) error {
	gx, gy, gz := grid[0], grid[1], grid[2]
	f, ok := d.funcs[name]
	if !ok {
		return fmt.Errorf("no kernel %s", name)
	}
	if len(args) > 24 {
		return fmt.Errorf("kernel %s: %d arguments (at most 24)", name, len(args))
	}
	ptrs := unsafe.Slice((*uintptr)(d.params), 24)
	vals := unsafe.Slice((*uint64)(unsafe.Add(d.params, 24*8)), 24)
	for i, a := range args {
		switch v := a.(type) {
		case uint64:
			vals[i] = v
		case int32:
			*(*int32)(unsafe.Pointer(&vals[i])) = v
		case int64:
			vals[i] = uint64(v)
		case float32:
			*(*float32)(unsafe.Pointer(&vals[i])) = v
		default:
			return fmt.Errorf("kernel %s: argument %d of type %T", name, i, a)
		}
		ptrs[i] = uintptr(unsafe.Pointer(&vals[i]))
	}
	// The driver copies the arguments at launch, so the staging area can
	// be reused at once.
	return check(api.launchKernel(f, gx, gy, gz, block, 1, 1, shared, stream, d.params, nil), "launch "+name)
}

// MemInfo returns the device's free and total memory in bytes.
func (d *Device) MemInfo() (free, total uint64, err error) {
	err = d.Do(func() error { return check(api.memGetInfo(&free, &total), "cuMemGetInfo") })
	return free, total, err
}

// pool is device memory reused across calls: one grow-only buffer per
// purpose, so loops that need scratch of varying sizes allocate only when
// a size is exceeded. Used on the owner goroutine only.
type pool map[string]Buffer

// get returns the buffer named name with at least bytes bytes.
func (p pool) get(name string, bytes uint64) (Buffer, error) {
	b, ok := p[name]
	if ok && b.bytes >= bytes {
		return b, nil
	}
	if ok {
		b.free()
		delete(p, name)
	}
	// Grow by half again, so slowly rising sizes do not reallocate at
	// every call.
	nb, err := alloc(max(bytes, b.bytes+b.bytes/2))
	if err != nil {
		return Buffer{}, err
	}
	p[name] = nb
	return nb, nil
}

// put copies s into the buffer named name, growing it as needed.
func put[T any](p pool, name string, s []T) (uint64, error) {
	n := uint64(len(s)) * uint64(unsafe.Sizeof(*new(T)))
	b, err := p.get(name, n)
	if err != nil || n == 0 {
		return b.ptr, err
	}
	return b.ptr, check(api.memcpyHtoD(b.ptr, unsafe.Pointer(&s[0]), n), "cuMemcpyHtoD "+name)
}

// zeroed returns the buffer named name with its first bytes (a multiple
// of 4) set to zero.
func (p pool) zeroed(name string, bytes uint64) (uint64, error) {
	b, err := p.get(name, bytes)
	if err != nil {
		return 0, err
	}
	return b.ptr, check(api.memsetD32(b.ptr, 0, bytes/4), "cuMemsetD32 "+name)
}

// staging collects the first error of a run of pool calls, so that a
// kernel's arguments can be staged one per line and checked once.
type staging struct{ err error }

func (st *staging) ptr(p uint64, err error) uint64 {
	if st.err == nil {
		st.err = err
	}
	return p
}

func (st *staging) buf(b Buffer, err error) Buffer {
	if st.err == nil {
		st.err = err
	}
	return b
}

// release frees every buffer.
func (p pool) release() {
	for k, b := range p {
		b.free()
		delete(p, k)
	}
}

// timeIt runs f reps times after a warm-up and returns the median time in
// milliseconds, measured with CUDA events around each run (on the owner
// goroutine).
func (d *Device) timeIt(reps int, f func() error) (float64, error) {
	var start, end uintptr
	if err := check(api.eventCreate(&start, 0), "cuEventCreate"); err != nil {
		return 0, err
	}
	defer api.eventDestroy(start)
	if err := check(api.eventCreate(&end, 0), "cuEventCreate"); err != nil {
		return 0, err
	}
	defer api.eventDestroy(end)
	if err := f(); err != nil { // warm-up
		return 0, err
	}
	times := make([]float64, 0, reps)
	for range reps {
		api.eventRecord(start, 0)
		if err := f(); err != nil {
			return 0, err
		}
		api.eventRecord(end, 0)
		if err := check(api.eventSynchronize(end), "cuEventSynchronize"); err != nil {
			return 0, err
		}
		var ms float32
		api.eventElapsed(&ms, start, end)
		times = append(times, float64(ms))
	}
	return medianOf(times), nil
}

func medianOf(v []float64) float64 {
	s := append([]float64(nil), v...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j-1] > s[j]; j-- {
			s[j-1], s[j] = s[j], s[j-1]
		}
	}
	return s[len(s)/2]
}
