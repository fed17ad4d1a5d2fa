package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lulc/lulc/cuda"
)

// addDeviceFlag registers --device on a command that computes.
func addDeviceFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVar(dst, "device", "auto", "where to compute: auto (a usable GPU, else the CPU), cpu, gpu or gpu:N")
}

// openDevice resolves --device: nil means the CPU (and its Close is a
// no-op, so callers defer it unconditionally). auto falls back to the
// CPU with a one-line notice; gpu fails when no GPU is usable, saying why.
func (a *app) openDevice(spec string) (*cuda.Device, error) {
	switch {
	case spec == "cpu":
		return nil, nil
	case spec == "auto":
		d, err := cuda.Open(0)
		if err != nil {
			a.log.Info("no usable GPU, computing on the CPU", "why", err)
			return nil, nil
		}
		a.log.Info("computing on the GPU", "device", d.Name)
		return d, nil
	case spec == "gpu" || strings.HasPrefix(spec, "gpu:"):
		index := 0
		if rest, ok := strings.CutPrefix(spec, "gpu:"); ok {
			n, err := strconv.Atoi(rest)
			if err != nil || n < 0 {
				return nil, usagef("--device %s: not gpu:N with N a GPU index", spec)
			}
			index = n
		}
		d, err := cuda.Open(index)
		if err != nil {
			return nil, fmt.Errorf("--device %s: no usable GPU: %w (lulc doctor says more)", spec, err)
		}
		return d, nil
	}
	return nil, usagef("--device %q is not auto, cpu, gpu or gpu:N", spec)
}

func newDoctorCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Say which GPUs lulc can use, and why not when it cannot",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			report, usable := cuda.Report()
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
