package cuda

import (
	"fmt"
	"strings"

	"github.com/lulc/lulc/device/cuda/driver"
)

// Report describes what lulc can use: the driver, each device with its
// memory and compute capability, whether lulc's kernels load on it, and,
// when no GPU can be used, why. It never fails: problems are its content.
func Report() (string, bool) {
	var b strings.Builder
	usable := false
	if err := driver.Load(); err != nil {
		fmt.Fprintf(&b, "GPU: not usable: %v\n", err)
		return b.String(), false
	}
	v, err := driver.DriverVersion()
	if err != nil {
		fmt.Fprintf(&b, "GPU: driver present but not usable: %v\n", err)
		return b.String(), false
	}
	fmt.Fprintf(&b, "driver: CUDA %s\nkernels: PTX ISA %s\n", v, ptxVersion(ptx))
	devs, err := driver.Devices()
	if err != nil {
		fmt.Fprintf(&b, "GPU: not usable: %v\n", err)
		return b.String(), false
	}
	for _, d := range devs {
		fmt.Fprintf(&b, "gpu:%d  %s  %.1f GiB  compute %d.%d  %d SMs", d.Index, d.Name, float64(d.Memory)/(1<<30), d.Major, d.Minor, d.SMs)
		dev, err := Open(d.Index, Options{})
		if err != nil {
			fmt.Fprintf(&b, "  kernels do not load: %v\n", err)
			continue
		}
		dev.Close()
		usable = true
		fmt.Fprintf(&b, "  kernels load: usable\n")
	}
	return b.String(), usable
}
