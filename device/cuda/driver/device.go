package driver

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

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
	// blocks is the threads a block of Launch for the kernels that take
	// other than defaultBlock.
	blocks map[string]int64
	params unsafe.Pointer // pinned host memory for kernel arguments
	closed bool
	// active counts the owner's work and the waits beside it (Beside)
	// in progress; busy sums the time at least one was, in ns.
	activeMu sync.Mutex
	active   int
	since    time.Time
	busy     atomic.Int64
	// blocking: the context's waits sleep (OpenSched), and so do its
	// events' (NewEvent).
	blocking bool
	// allowed is each kernel's dynamic shared memory allowed so far
	// (AllowShared; owner goroutine).
	allowed map[string]int
	// mem is the device's memory pool for the per-call work (composite,
	// median, binning, …): a window's buffers are reused by the next
	// window instead of being allocated and freed each time.
	mem Pool
	ctx uintptr // the primary context
	// copier is a second goroutine locked to its own OS thread with the
	// context current, started on first use (aside): it makes copies from
	// pageable host memory, which hold their calling thread for as long
	// as the bytes take to stage, while the owner goes on launching work.
	copier     chan func()
	copyStream uintptr // non-blocking: its copies overlap the owner's kernels
	copyOnce   sync.Once
	copyErr    error
	stage      *stager // the copier's pinned staging, made on first use
}

// Open retains device index's primary context on a new owner goroutine.
// The device has no kernels until LoadModule.
func Open(index int) (*Device, error) { return OpenSched(index, false) }

// OpenSched is Open that, with blocking, has the context's waits (stream,
// event and context synchronizes, synchronous copies) sleep on the
// driver's interrupt instead of spinning a core: CU_CTX_SCHED_BLOCKING_SYNC,
// set on the primary context before it is retained. Without it the driver
// picks (it spins when the GPUs are fewer than the cores).
func OpenSched(index int, blocking bool) (*Device, error) {
	devs, err := Devices()
	if err != nil {
		return nil, err
	}
	if index < 0 || index >= len(devs) {
		return nil, fmt.Errorf("no GPU %d (the driver sees %d)", index, len(devs))
	}
	d := &Device{Info: devs[index], work: make(chan func()), first: make(chan func()), funcs: map[string]uintptr{}, mem: Pool{}, blocking: blocking}
	ready := make(chan error)
	go d.own(ready, blocking)
	if err := <-ready; err != nil {
		return nil, err
	}
	return d, nil
}

// own is the device-owning goroutine.
func (d *Device) own(ready chan<- error, blocking bool) {
	runtime.LockOSThread()
	var cu int32
	var ctx uintptr
	err := check(api.deviceGet(&cu, int32(d.Index)), "cuDeviceGet")
	if err == nil && blocking {
		const schedBlockingSync = 0x04
		err = check(api.primarySetFlags(cu, schedBlockingSync), "cuDevicePrimaryCtxSetFlags")
	}
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

// DoFirst is Do ahead of the calls waiting in Do.
func (d *Device) DoFirst(f func() error) error { return d.do(d.first, f) }

func (d *Device) do(queue chan func(), f func() error) error {
	if d.closed {
		return errors.New("cuda: device closed")
	}
	done := make(chan error)
	queue <- func() {
		d.enter()
		err := f()
		d.leave()
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

// NewEvent creates an event to wait on (owner goroutine, or a thread
// with the context current): one whose waits sleep when the device's do
// (OpenSched), since an event's wait spins by its own flags, not the
// context's.
func (d *Device) NewEvent() (Event, error) { return newEvent(d.blocking) }

// Beside runs f on the calling goroutine with the device's context
// current on its thread, beside the owner, which goes on with other
// work: for waits on a stream or an event, and copies on a stream of the
// caller's own, that touch no state of the owner's. A window that waits
// there for its kernels leaves the owner free to queue another tile's
// meanwhile, so that the device runs both.
func (d *Device) Beside(f func() error) error {
	if d.closed {
		return errors.New("cuda: device closed")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := check(api.ctxSetCurrent(d.ctx), "cuCtxSetCurrent"); err != nil {
		return err
	}
	d.enter()
	defer d.leave()
	return f()
}

// enter and leave bracket the owner's work and the waits beside it:
// the device counts as busy while any is in progress (Busy).
func (d *Device) enter() {
	d.activeMu.Lock()
	if d.active == 0 {
		d.since = time.Now()
	}
	d.active++
	d.activeMu.Unlock()
}

func (d *Device) leave() {
	d.activeMu.Lock()
	d.active--
	if d.active == 0 {
		d.busy.Add(int64(time.Since(d.since)))
	}
	d.activeMu.Unlock()
}

// Await waits for event e beside the owner (Beside), which goes on
// meanwhile.
func (d *Device) Await(e Event) error { return d.Beside(e.Wait) }

// CopyAside copies src to device address dst on the copier goroutine,
// while the owner goes on, and returns once the bytes are there: through
// the copier's two pinned staging buffers (see stager), or, with
// pageable, straight from src's pageable memory.
func (d *Device) CopyAside(dst uint64, src []byte, pageable bool) error {
	err := d.aside(func() error {
		if !pageable {
			return d.stagedCopy(dst, src)
		}
		if err := check(api.memcpyHtoDAsync(dst, unsafe.Pointer(&src[0]), uint64(len(src)), d.copyStream), "cuMemcpyHtoDAsync ahead"); err != nil {
			return err
		}
		return check(api.streamSync(d.copyStream), "cuStreamSynchronize ahead")
	})
	runtime.KeepAlive(src)
	return err
}

// Busy returns the time the device has had work in progress: the owner
// goroutine running some, or a caller waiting beside it for kernels and
// copies queued (Beside), counted once when they overlap. Against a
// command's wall time it says how busy the device was kept.
func (d *Device) Busy() time.Duration { return time.Duration(d.busy.Load()) }

// Pool returns the device's memory pool, for work on the owner goroutine.
func (d *Device) Pool() Pool { return d.mem }

// Close releases the device's pool, pinned memory and streams; closing a
// nil Device does nothing.
func (d *Device) Close() {
	if d != nil && !d.closed {
		d.Do(func() error {
			d.mem.Release()
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

// LoadModule loads a module on the owner goroutine, a PTX text (which
// the driver JIT-compiles) or a fatbin (whose machine code for the device
// loads as it is, else its PTX is JIT-compiled), and takes the named
// kernels from it; blocks gives the threads a block of Launch and
// LaunchAsync for the kernels that take other than 256. The error of a
// module that does not compile holds the JIT's log.
func (d *Device) LoadModule(image []byte, kernels []string, blocks map[string]int64) error {
	return d.Do(func() error {
		// PTX must end in a NUL; a fatbin carries its size and ignores it.
		src := append(slices.Clip(image), 0)
		logBuf := make([]byte, 8192)
		// CU_JIT_ERROR_LOG_BUFFER (5) and its size (6).
		opts := []int32{5, 6}
		vals := []uintptr{uintptr(unsafe.Pointer(&logBuf[0])), uintptr(len(logBuf))}
		r := api.moduleLoadDataEx(&d.module, unsafe.Pointer(&src[0]), 2, &opts[0], &vals[0])
		runtime.KeepAlive(src)
		runtime.KeepAlive(logBuf)
		if r != 0 {
			return fmt.Errorf("%w: %s", Result(r), cString(&logBuf[0]))
		}
		for _, name := range kernels {
			var f uintptr
			cname := append([]byte(name), 0)
			if err := check(api.moduleGetFunc(&f, d.module, &cname[0]), "cuModuleGetFunction "+name); err != nil {
				return err
			}
			d.funcs[name] = f
		}
		d.blocks = blocks
		return nil
	})
}

// SharedMemory returns the most shared memory a block may ask for (opting
// in beyond the default 48 KiB) and what one multiprocessor holds, in
// bytes (owner goroutine).
func (d *Device) SharedMemory() (perBlock, perSM int, err error) {
	var cu, b, m int32
	if err := check(api.deviceGet(&cu, int32(d.Index)), "cuDeviceGet"); err != nil {
		return 0, 0, err
	}
	// CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN (97) and
	// …_PER_MULTIPROCESSOR (81).
	if err := check(api.deviceGetAttr(&b, 97, cu), "cuDeviceGetAttribute"); err != nil {
		return 0, 0, err
	}
	if err := check(api.deviceGetAttr(&m, 81, cu), "cuDeviceGetAttribute"); err != nil {
		return 0, 0, err
	}
	return int(b), int(m), nil
}

// AllowShared lets kernel name launch with up to bytes of dynamic shared
// memory, beyond the default 48 KiB (owner goroutine).
func (d *Device) AllowShared(name string, bytes int) error {
	f, ok := d.funcs[name]
	if !ok {
		return fmt.Errorf("no kernel %s", name)
	}
	// The attribute is the kernel's, not a launch's: never lower it
	// below what another user (a second forest) was allowed.
	if bytes <= d.allowed[name] {
		return nil
	}
	// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES (8).
	if err := check(api.funcSetAttr(f, 8, int32(bytes)), "cuFuncSetAttribute "+name); err != nil {
		return err
	}
	if d.allowed == nil {
		d.allowed = map[string]int{}
	}
	d.allowed[name] = bytes
	return nil
}

// MemInfo returns the device's free and total memory in bytes.
func (d *Device) MemInfo() (free, total uint64, err error) {
	err = d.Do(func() error {
		free, total, err = MemGetInfo()
		return err
	})
	return free, total, err
}

// defaultBlock is the threads a block of Launch and LaunchAsync.
const defaultBlock = 256

// LaunchAsync queues kernel name over n elements on stream (no wait).
func (d *Device) LaunchAsync(stream uintptr, name string, n int64, args ...any) error {
	return d.launchOn(stream, false, name, n, args...)
}

// Launch runs kernel name over n elements with the arguments (each a
// uint64 device pointer, int32, int64 or float32), then synchronises and
// reports any launch or execution error (owner goroutine).
func (d *Device) Launch(name string, n int64, args ...any) error {
	return d.launchOn(0, true, name, n, args...)
}

func (d *Device) launchOn(stream uintptr, wait bool, name string, n int64, args ...any) error {
	block := int64(defaultBlock)
	if b, ok := d.blocks[name]; ok {
		block = b
	}
	grid := uint32(min((n+block-1)/block, int64(d.SMs*32)))
	if grid == 0 {
		grid = 1
	}
	if err := d.LaunchGrid(stream, name, [3]uint32{grid, 1, 1}, uint32(block), 0, args...); err != nil {
		return err
	}
	if !wait {
		return nil
	}
	return check(api.ctxSynchronize(), "run "+name)
}

// LaunchGrid queues kernel name on stream, on a grid of blocks of block
// threads with shared bytes of dynamic shared memory. Arguments (each a
// uint64 device pointer, int32, int64 or float32) are staged in pinned
// host memory, since the driver reads them through pointers (owner
// goroutine).
func (d *Device) LaunchGrid(stream uintptr, name string, grid [3]uint32, block, shared uint32, args ...any) error {
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

// TimeIt runs f reps times after a warm-up and returns the median time in
// milliseconds, measured with CUDA events around each run (owner
// goroutine).
func TimeIt(reps int, f func() error) (float64, error) {
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
