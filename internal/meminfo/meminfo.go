// Package meminfo reads the host's memory figures from /proc/meminfo, for
// the commands that size their buffers or refuse work by them.
package meminfo

import (
	"fmt"
	"os"
	"strings"
)

// Total is the host's memory in bytes (MemTotal), 0 where unknown.
func Total() uint64 { return read("MemTotal") }

// Available is the memory the kernel can give without swapping, in bytes
// (MemAvailable), 0 where unknown.
func Available() uint64 { return read("MemAvailable") }

func read(key string) uint64 {
	body, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	return parse(string(body), key)
}

// parse finds "key: N kB" in a meminfo listing.
func parse(body, key string) uint64 {
	var kb uint64
	for line := range strings.SplitSeq(body, "\n") {
		if n, _ := fmt.Sscanf(line, key+": %d kB", &kb); n == 1 {
			return kb * 1024
		}
	}
	return 0
}
