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
	images, err := Images(fatbin)
	if err != nil {
		fmt.Fprintf(&b, "GPU: not usable: the embedded kernels: %v\n", err)
		return b.String(), false
	}
	fmt.Fprintf(&b, "driver: CUDA %s\nkernels: machine code for %s; PTX ISA %s for other GPUs (JIT-compiled by the driver on first use)\n",
		v, strings.Join(machineArchs(images), ", "), ptxVersion(ptx))
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
		if im, ok := MachineCode(images, d.Major, d.Minor); ok {
			fmt.Fprintf(&b, "  kernels load: usable (machine code %s)\n", im)
		} else {
			fmt.Fprintf(&b, "  kernels load: usable (PTX, JIT-compiled for compute %d.%d)\n", d.Major, d.Minor)
		}
	}
	return b.String(), usable
}
