package driver

import (
	"runtime"
	"sync"
	"unsafe"
)

// stageChunk is the size of each of a stager's two pinned buffers.
const stageChunk = 64 << 20

// stager copies host memory to the device through two pinned buffers:
// a few goroutines copy a chunk of the source into one buffer
// while the DMA engine takes the other across PCIe. The driver's own copy
// from pageable memory stages through its buffer on the calling thread,
// at about 7 GB/s on an H100 host against 54 GB/s from pinned memory
// (docs/benchmarks.md); pinning the source itself costs more than the
// copy saves (0.6–0.9 s a gigabyte), and two small buffers are pinned
// once per device.
type stager struct {
	buf    [2]unsafe.Pointer
	done   [2]uintptr // events: the buffer's last copy has crossed
	used   [2]bool
	stream uintptr
}

// newStager makes the buffers, events and stream (a thread with the
// device's context current).
func newStager() (*stager, error) {
	s := &stager{}
	for k := range s.buf {
		if err := check(api.memAllocHost(&s.buf[k], stageChunk), "cuMemAllocHost staging"); err != nil {
			s.free()
			return nil, err
		}
		if err := check(api.eventCreate(&s.done[k], 2), "cuEventCreate staging"); err != nil { // CU_EVENT_DISABLE_TIMING
			s.free()
			return nil, err
		}
	}
	// CU_STREAM_NON_BLOCKING: no implicit ordering with the owner's work.
	if err := check(api.streamCreate(&s.stream, 1), "cuStreamCreate staging"); err != nil {
		s.free()
		return nil, err
	}
	return s, nil
}

// stagedCopy copies src to device address dst through the device's
// stager, made on first use (on the copier goroutine, in Device.aside).
func (d *Device) stagedCopy(dst uint64, src []byte) error {
	if d.stage == nil {
		var err error
		if d.stage, err = newStager(); err != nil {
			return err
		}
	}
	return d.stage.copy(dst, src)
}

// copy copies src to device address dst and returns once the bytes are
// there.
func (s *stager) copy(dst uint64, src []byte) error {
	for i, off := 0, 0; off < len(src); i, off = i+1, off+stageChunk {
		k := i % 2
		if s.used[k] {
			if err := check(api.eventSynchronize(s.done[k]), "cuEventSynchronize staging"); err != nil {
				return err
			}
		}
		part := src[off:min(off+stageChunk, len(src))]
		parallelCopy(unsafe.Slice((*byte)(s.buf[k]), len(part)), part)
		if err := check(api.memcpyHtoDAsync(dst+uint64(off), s.buf[k], uint64(len(part)), s.stream), "cuMemcpyHtoDAsync staging"); err != nil {
			return err
		}
		if err := check(api.eventRecord(s.done[k], s.stream), "cuEventRecord staging"); err != nil {
			return err
		}
		s.used[k] = true
	}
	return check(api.streamSync(s.stream), "cuStreamSynchronize staging")
}

// copiers is how many goroutines fill a staging buffer: one thread copies
// at a fraction of the host's memory bandwidth, and four outrun PCIe
// without taking the cores the readers and windows work on.
const copiers = 4

// parallelCopy copies src into dst (as long) on up to copiers goroutines.
func parallelCopy(dst, src []byte) {
	const piece = 4 << 20
	n := min(copiers, runtime.GOMAXPROCS(0), (len(src)+piece-1)/piece)
	if n <= 1 {
		copy(dst, src)
		return
	}
	per := (len(src) + n - 1) / n
	var wg sync.WaitGroup
	for lo := 0; lo < len(src); lo += per {
		hi := min(lo+per, len(src))
		wg.Go(func() { copy(dst[lo:hi], src[lo:hi]) })
	}
	wg.Wait()
}

func (s *stager) free() {
	for k := range s.buf {
		if s.buf[k] != nil {
			api.memFreeHost(s.buf[k])
		}
		if s.done[k] != 0 {
			api.eventDestroy(s.done[k])
		}
	}
	if s.stream != 0 {
		api.streamDestroy(s.stream)
	}
}
