package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/lulc/lulc/stage"
)

// compareFromEnv reads the developer's switches for comparing lulc's way
// of working with another on one machine (docs/gpu.md), the only place
// they are read: library code takes them as options.
//
//	LULC_DEVICE_DECODE=off   decode tiles on the host with a device
//	LULC_DEVICE_DRAW=off     draw samples on the host with a device
//	LULC_DEVICE_AOA=off      measure the AOA's training points on the host
//	LULC_DEVICE_LABELS=off   map label rasters onto the grid on the host
//	LULC_DEVICE_STAGING=off  copy rows and windows to the device from pageable memory
//	LULC_TRAIN_PROFILE=1     time the device's training kernels by group
//	LULC_FOREST_SWEEP=off    walk the forest with only the trees' tops in shared memory
//	LULC_AOA_SPLIT=off       measure a pixel's AOA distances in one block, unsplit
//	LULC_AOA_SHARED=off      upload a window and compute its features again for its AOA
//	LULC_WINDOW_ASIDE=off    copy a window's DNs to the device on its owner goroutine
//	LULC_STREAMS_APART=off   the owner waits for composites (the whole device), windows' passes and rows decoded ahead
//	LULC_CUDA_SPIN=off       the device's waits sleep (blocking sync) instead of spinning
//	LULC_ROWS_APART=off      rows decoded ahead go by the null stream, after the composites, not on a stream of their own
//	LULC_TOUCH_OUTPUTS=off   the device's copies down fault in a window's fresh output pages under their locks
//	LULC_MAP_BESIDE=off      lulc run predicts a tile after its composite, not row by row beside it
//	LULC_EARLY_MAPS=off      the class and confidence COGs are compressed whole at a tile's end, not as the stream completes their rows
//	LULC_LANE_CORES=all      every lane of a run on several GPUs works on all the cores
//	LULC_REMOTE_AHEAD=off    the CPU reads remote bands through GDAL window by window, not compressed rows ahead
//	LULC_MAP_MIRROR=off      lulc run's GPU prediction sends each window's DNs up from the host, not from the device's copy of the composite
//	LULC_COG_ENCODER=gdal    write COGs with GDAL's driver
//	LULC_PTX=FILE            load these kernels instead of the embedded ones
//
// Any other value of a switch is an error that names it.
func compareFromEnv(getenv func(string) string) (stage.Compare, error) {
	var c stage.Compare
	var errs []error
	flag := func(name, on string, dst *bool) {
		switch v := getenv(name); v {
		case "":
		case on:
			*dst = true
		default:
			errs = append(errs, fmt.Errorf("%s=%q: the only value it takes is %q (unset it for lulc's way)", name, v, on))
		}
	}
	flag("LULC_DEVICE_DECODE", "off", &c.HostDecode)
	flag("LULC_DEVICE_DRAW", "off", &c.HostDraw)
	flag("LULC_DEVICE_AOA", "off", &c.HostAOA)
	flag("LULC_DEVICE_LABELS", "off", &c.HostLabels)
	flag("LULC_DEVICE_STAGING", "off", &c.Device.Pageable)
	flag("LULC_TRAIN_PROFILE", "1", &c.Device.TrainProfile)
	flag("LULC_FOREST_SWEEP", "off", &c.Device.TopsOnly)
	flag("LULC_AOA_SPLIT", "off", &c.Device.AOAUnsplit)
	flag("LULC_AOA_SHARED", "off", &c.ApartAOA)
	flag("LULC_WINDOW_ASIDE", "off", &c.Device.OwnerCopies)
	flag("LULC_STREAMS_APART", "off", &c.Device.WaitAll)
	flag("LULC_CUDA_SPIN", "off", &c.Device.BlockingSync)
	flag("LULC_ROWS_APART", "off", &c.Device.RowsOnNull)
	flag("LULC_TOUCH_OUTPUTS", "off", &c.Device.UntouchedOutputs)
	flag("LULC_MAP_BESIDE", "off", &c.MapAfterComposite)
	flag("LULC_EARLY_MAPS", "off", &c.LateMaps)
	flag("LULC_LANE_CORES", "all", &c.LaneAllCores)
	flag("LULC_REMOTE_AHEAD", "off", &c.RemoteGDAL)
	flag("LULC_MAP_MIRROR", "off", &c.HostWindows)
	flag("LULC_COG_ENCODER", "gdal", &c.GDALCOG)
	if p := getenv("LULC_PTX"); p != "" {
		b, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("LULC_PTX: %w", err))
		}
		c.Device.PTX = string(b)
	}
	return c, errors.Join(errs...)
}
