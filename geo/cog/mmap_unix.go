//go:build unix

package cog

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// mapTemp maps a new file of size bytes at name into memory and unlinks
// it: the pages stay backed by disk until unmap, and no file outlives the
// process.
func mapTemp(name string, size int64) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer os.Remove(name)
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return nil, err
	}
	if int64(int(size)) != size {
		return nil, fmt.Errorf("cannot map %d bytes", size)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", name, err)
	}
	return mem, nil
}

func unmap(mem []byte) error {
	if err := syscall.Munmap(mem); err != nil {
		return errors.Join(errors.New("unmap staging file"), err)
	}
	return nil
}
