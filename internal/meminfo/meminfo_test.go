package meminfo

import (
	"os"
	"testing"
)

func TestParse(t *testing.T) {
	body := "MemTotal:       24576000 kB\nMemFree:         1000 kB\nMemAvailable:   12288000 kB\n"
	if got := parse(body, "MemTotal"); got != 24576000*1024 {
		t.Errorf("MemTotal = %d", got)
	}
	if got := parse(body, "MemAvailable"); got != 12288000*1024 {
		t.Errorf("MemAvailable = %d", got)
	}
	if got := parse(body, "SwapTotal"); got != 0 {
		t.Errorf("a missing key = %d, not 0", got)
	}
}

func TestHost(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo")
	}
	total, avail := Total(), Available()
	if total == 0 || avail == 0 || avail > total {
		t.Errorf("total %d, available %d", total, avail)
	}
}
