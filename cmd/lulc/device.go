package main

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/device/cuda/driver"
	"github.com/lulc/lulc/learn/forest"
)

// addDeviceFlag registers --device on a command that computes.
func addDeviceFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVar(dst, "device", "auto", "where to compute: auto (a usable GPU, else the CPU), cpu, gpu (the first GPU), gpu:N, gpu:N,M,… or gpu:all")
}

// devices are the GPUs a command computes on; none is the CPU.
type devices []*cuda.Device

// Close releases every device (nil entries too: a failed open).
func (ds devices) Close() {
	for _, d := range ds {
		d.Close()
	}
}

// openDevice resolves --device: no device means the CPU (and Close is a
// no-op, so callers defer it unconditionally). auto falls back to the CPU
// with a one-line notice; gpu… fails when a GPU it names is not usable,
// saying why. gpu:all opens every GPU the driver sees, gpu:0,2 the ones
// listed, in that order.
func (a *app) openDevice(spec string) (devices, error) {
	switch {
	case spec == "cpu":
		return nil, nil
	case spec == "auto":
		d, err := cuda.Open(0, a.compare.Device)
		if err != nil {
			a.log.Info("no usable GPU, computing on the CPU", "why", err)
			return nil, nil
		}
		a.log.Info("computing on the GPU", "device", d.Name)
		return devices{d}, nil
	case spec == "gpu" || strings.HasPrefix(spec, "gpu:"):
		indices, err := deviceIndices(spec)
		if err != nil {
			return nil, err
		}
		// Each open JIT-compiles the kernels (about a second): at once.
		ds := make(devices, len(indices))
		errs := make([]error, len(indices))
		var wg sync.WaitGroup
		for k, i := range indices {
			wg.Go(func() {
				if ds[k], errs[k] = cuda.Open(i, a.compare.Device); errs[k] != nil {
					errs[k] = fmt.Errorf("--device %s: no usable GPU %d: %w (lulc doctor says more)", spec, i, errs[k])
				}
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			ds.Close()
			return nil, err
		}
		if len(ds) > 1 {
			a.log.Info("computing on several GPUs", "devices", len(ds), "model", ds[0].Name)
		}
		return ds, nil
	}
	return nil, usagef("--device %q is not auto, cpu, gpu, gpu:N, gpu:N,M,… or gpu:all", spec)
}

// deviceIndices lists the GPU indices a gpu… device spec names; gpu:all
// asks the driver how many there are.
func deviceIndices(spec string) ([]int, error) {
	rest, ok := strings.CutPrefix(spec, "gpu:")
	if !ok {
		return []int{0}, nil
	}
	if rest == "all" {
		infos, err := driver.Devices()
		if err != nil {
			return nil, fmt.Errorf("--device %s: no usable GPU: %w (lulc doctor says more)", spec, err)
		}
		out := make([]int, len(infos))
		for i := range out {
			out[i] = i
		}
		return out, nil
	}
	var out []int
	for _, f := range strings.Split(rest, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, usagef("--device %s: %q is not a GPU index (gpu:N, gpu:N,M,… or gpu:all)", spec, f)
		}
		if slices.Contains(out, n) {
			return nil, usagef("--device %s: GPU %d is named twice", spec, n)
		}
		out = append(out, n)
	}
	return out, nil
}

func newDoctorCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Say which GPUs lulc can use, and why not when it cannot",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			report, usable := cuda.Report()
			report += fmt.Sprintf("CPU: %d cores; %s\n", runtime.NumCPU(), forest.CPUReport())
			if a.json {
				on := "cpu"
				if usable {
					on = "gpu"
				}
				a.summary(struct {
					ComputeOn string   `json:"compute_on"`
					Report    []string `json:"report"`
				}{on, strings.Split(strings.TrimSuffix(report, "\n"), "\n")})
				return nil
			}
			fmt.Fprint(a.stdout, report)
			if usable {
				fmt.Fprintln(a.stdout, "lulc will compute on the GPU with --device auto or gpu")
			} else {
				fmt.Fprintln(a.stdout, "lulc will compute on the CPU (--device auto or cpu)")
			}
			return nil
		},
	}
}
