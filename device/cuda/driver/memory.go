package driver

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Buffer is device memory: Bytes bytes at device address Ptr.
type Buffer struct {
	Ptr   uint64
	Bytes uint64
}

// Alloc allocates device memory (owner goroutine).
func Alloc(bytes uint64) (Buffer, error) {
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

// Free frees the buffer's device memory (owner goroutine).
func (b Buffer) Free() {
	api.memFree(b.Ptr)
	held.Add(-int64(max(b.Bytes, 1)))
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

// Upload copies a Go slice's bytes to a new device buffer.
func Upload[T any](s []T) (Buffer, error) {
	n := uint64(len(s)) * uint64(unsafe.Sizeof(*new(T)))
	b, err := Alloc(n)
	if err != nil || n == 0 {
		return b, err
	}
	if err := check(api.memcpyHtoD(b.Ptr, unsafe.Pointer(&s[0]), n), "cuMemcpyHtoD"); err != nil {
		b.Free()
		return Buffer{}, err
	}
	return b, nil
}

// PutAt copies a Go slice's bytes to device address ptr (inside a buffer
// the caller sized).
func PutAt[T any](ptr uint64, s []T) error {
	n := uint64(len(s)) * uint64(unsafe.Sizeof(*new(T)))
	if n == 0 {
		return nil
	}
	return check(api.memcpyHtoD(ptr, unsafe.Pointer(&s[0]), n), "cuMemcpyHtoD")
}

// PutOn queues a copy of a Go slice's bytes to device address ptr on
// stream s. The driver stages pageable memory before it returns, so the
// slice may change at once. Unlike PutAt, whose copy goes by the null
// stream after all the work queued there (another tile's composite, say),
// it waits for nothing but s.
func PutOn[T any](ptr uint64, s []T, stream uintptr) error {
	n := uint64(len(s)) * uint64(unsafe.Sizeof(*new(T)))
	if n == 0 {
		return nil
	}
	err := check(api.memcpyHtoDAsync(ptr, unsafe.Pointer(&s[0]), n, stream), "cuMemcpyHtoDAsync")
	runtime.KeepAlive(s)
	return err
}

// GetOn copies the first bytes of a device buffer into a Go slice after
// the work queued on stream s, and waits for it: Download without the
// null stream's wait.
func GetOn[T any](s []T, b Buffer, stream uintptr) error {
	n := uint64(len(s)) * uint64(unsafe.Sizeof(*new(T)))
	if n == 0 {
		return nil
	}
	if err := check(api.memcpyDtoHAsync(unsafe.Pointer(&s[0]), b.Ptr, n, stream), "cuMemcpyDtoHAsync"); err != nil {
		return err
	}
	err := check(api.streamSync(stream), "cuStreamSynchronize")
	runtime.KeepAlive(s)
	return err
}

// Download copies a device buffer into a Go slice.
func Download[T any](s []T, b Buffer) error {
	n := uint64(len(s)) * uint64(unsafe.Sizeof(*new(T)))
	if n == 0 {
		return nil
	}
	return check(api.memcpyDtoH(unsafe.Pointer(&s[0]), b.Ptr, n), "cuMemcpyDtoH")
}

// Pool is device memory reused across calls: one grow-only buffer per
// purpose, so loops that need scratch of varying sizes allocate only when
// a size is exceeded. Used on the owner goroutine only.
type Pool map[string]Buffer

// Get returns the buffer named name with at least bytes bytes.
func (p Pool) Get(name string, bytes uint64) (Buffer, error) {
	b, ok := p[name]
	if ok && b.Bytes >= bytes {
		return b, nil
	}
	if ok {
		// Work queued on the null stream may still read the buffer (a
		// batch decoded ahead is not waited for), and cuMemFree promises
		// no synchronisation: the memory could go to another allocation
		// while that work reads it.
		if err := SyncStream(0); err != nil {
			return Buffer{}, err
		}
		b.Free()
		delete(p, name)
	}
	// Grow by half again, so slowly rising sizes do not reallocate at
	// every call.
	nb, err := Alloc(max(bytes, b.Bytes+b.Bytes/2))
	if err != nil {
		return Buffer{}, err
	}
	p[name] = nb
	return nb, nil
}

// Put copies s into the buffer named name, growing it as needed, and
// returns its address.
func Put[T any](p Pool, name string, s []T) (uint64, error) {
	n := uint64(len(s)) * uint64(unsafe.Sizeof(*new(T)))
	b, err := p.Get(name, n)
	if err != nil || n == 0 {
		return b.Ptr, err
	}
	return b.Ptr, check(api.memcpyHtoD(b.Ptr, unsafe.Pointer(&s[0]), n), "cuMemcpyHtoD "+name)
}

// Zeroed returns the address of the buffer named name with its first
// bytes (a multiple of 4) set to zero.
func (p Pool) Zeroed(name string, bytes uint64) (uint64, error) {
	b, err := p.Get(name, bytes)
	if err != nil {
		return 0, err
	}
	return b.Ptr, check(api.memsetD32(b.Ptr, 0, bytes/4), "cuMemsetD32 "+name)
}

// Release frees every buffer.
func (p Pool) Release() {
	for k, b := range p {
		b.Free()
		delete(p, k)
	}
}

// Staging collects the first error of a run of pool calls, so that a
// kernel's arguments can be staged one per line and checked once (Err).
type Staging struct{ Err error }

// Ptr returns p, keeping err if it is the first.
func (st *Staging) Ptr(p uint64, err error) uint64 {
	if st.Err == nil {
		st.Err = err
	}
	return p
}

// Buf returns b, keeping err if it is the first.
func (st *Staging) Buf(b Buffer, err error) Buffer {
	if st.Err == nil {
		st.Err = err
	}
	return b
}

// The calls below wrap the driver's own of the name they give in their
// errors; each runs where a context is current (owner goroutine).

// Synchronize waits for all the context's work (cuCtxSynchronize).
func Synchronize() error { return check(api.ctxSynchronize(), "cuCtxSynchronize") }

// MemGetInfo returns the current device's free and total memory in bytes.
func MemGetInfo() (free, total uint64, err error) {
	err = check(api.memGetInfo(&free, &total), "cuMemGetInfo")
	return free, total, err
}

// CreateStream creates a stream into s that does not wait for the legacy
// default stream (CU_STREAM_NON_BLOCKING).
func CreateStream(s *uintptr) error { return check(api.streamCreate(s, 1), "cuStreamCreate") }

// DestroyStream destroys stream s.
func DestroyStream(s uintptr) { api.streamDestroy(s) }

// SyncStream waits for the work queued on stream s.
func SyncStream(s uintptr) error { return check(api.streamSync(s), "cuStreamSynchronize") }

// AllocHost allocates bytes of pinned host memory into p.
func AllocHost(p *unsafe.Pointer, bytes uint64) error {
	return check(api.memAllocHost(p, bytes), "cuMemAllocHost")
}

// FreeHost frees pinned host memory.
func FreeHost(p unsafe.Pointer) { api.memFreeHost(p) }

// CopyOnDevice copies n bytes from device address src to dst.
func CopyOnDevice(dst, src uint64, n uint64) error {
	return check(api.memcpyDtoD(dst, src, n), "cuMemcpyDtoD")
}

// CopyToDeviceAsync queues a copy of n bytes from host memory src (pinned,
// for the copy to be asynchronous) to device address dst on stream s.
func CopyToDeviceAsync(dst uint64, src unsafe.Pointer, n uint64, s uintptr) error {
	return check(api.memcpyHtoDAsync(dst, src, n, s), "cuMemcpyHtoDAsync")
}

// CopyToHostAsync queues a copy of n bytes from device address src to
// host memory dst (pinned) on stream s.
func CopyToHostAsync(dst unsafe.Pointer, src uint64, n uint64, s uintptr) error {
	return check(api.memcpyDtoHAsync(dst, src, n, s), "cuMemcpyDtoHAsync")
}

// Event marks a point in a stream's work (CUDA events without timing).
type Event uintptr

// NewEvent creates an event (owner goroutine, or a thread with the
// context current).
func NewEvent() (Event, error) { return newEvent(false) }

func newEvent(blocking bool) (Event, error) {
	var e uintptr
	// CU_EVENT_DISABLE_TIMING (2): the cheapest kind, for waiting only;
	// CU_EVENT_BLOCKING_SYNC (1): its waits sleep.
	flags := uint32(2)
	if blocking {
		flags |= 1
	}
	err := check(api.eventCreate(&e, flags), "cuEventCreate")
	return Event(e), err
}

// Record marks the work queued on stream s so far: the event completes
// once it has run.
func (e Event) Record(s uintptr) error { return check(api.eventRecord(uintptr(e), s), "cuEventRecord") }

// Wait waits for the event to complete (owner goroutine, or a thread
// with the context current: Device.Beside).
func (e Event) Wait() error { return check(api.eventSynchronize(uintptr(e)), "cuEventSynchronize") }

// WaitOn has stream s's later work wait until the event completes,
// without holding the host: the way work on one stream waits for
// another's. The event may be destroyed once this returns.
func (e Event) WaitOn(s uintptr) error {
	return check(api.streamWaitEvent(s, uintptr(e), 0), "cuStreamWaitEvent")
}

// Destroy frees the event.
func (e Event) Destroy() { api.eventDestroy(uintptr(e)) }

// Memset32On queues on stream s the setting of n 32-bit words from
// device address dst to v.
func Memset32On(dst uint64, v uint32, n uint64, s uintptr) error {
	return check(api.memsetD32Async(dst, v, n, s), "cuMemsetD32Async")
}

// Memset32 sets n 32-bit words from device address dst to v.
func Memset32(dst uint64, v uint32, n uint64) error {
	return check(api.memsetD32(dst, v, n), "cuMemsetD32")
}
