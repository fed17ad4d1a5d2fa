package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompareFromEnv: each LULC_* switch turns into its option, unset
// ones leave lulc's way, a value a switch does not take is an error that
// names the variable, and LULC_PTX reads the file it names.
func TestCompareFromEnv(t *testing.T) {
	ptx := filepath.Join(t.TempDir(), "k.ptx")
	if err := os.WriteFile(ptx, []byte(".version 9.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"LULC_DEVICE_DECODE": "off", "LULC_DEVICE_DRAW": "off", "LULC_DEVICE_STAGING": "off",
		"LULC_DEVICE_AOA": "off", "LULC_DEVICE_LABELS": "off", "LULC_TRAIN_PROFILE": "1", "LULC_FOREST_SWEEP": "off", "LULC_AOA_SPLIT": "off", "LULC_AOA_SHARED": "off", "LULC_WINDOW_ASIDE": "off", "LULC_STREAMS_APART": "off", "LULC_CUDA_SPIN": "off", "LULC_ROWS_APART": "off", "LULC_TOUCH_OUTPUTS": "off", "LULC_MAP_BESIDE": "off", "LULC_EARLY_MAPS": "off", "LULC_LANE_CORES": "all", "LULC_REMOTE_AHEAD": "off", "LULC_MAP_MIRROR": "off", "LULC_COG_ENCODER": "gdal", "LULC_PTX": ptx}
	c, err := compareFromEnv(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if !c.HostDecode || !c.HostDraw || !c.HostAOA || !c.HostLabels || !c.GDALCOG || !c.Device.Pageable || !c.Device.TrainProfile || !c.Device.TopsOnly || !c.Device.AOAUnsplit || !c.ApartAOA || !c.Device.OwnerCopies || !c.Device.WaitAll || !c.Device.BlockingSync || !c.Device.RowsOnNull || !c.Device.UntouchedOutputs || !c.MapAfterComposite || !c.LateMaps || !c.LaneAllCores || !c.RemoteGDAL || !c.HostWindows || c.Device.PTX != ".version 9.0\n" {
		t.Errorf("every switch set: %+v", c)
	}
	if c, err := compareFromEnv(func(string) string { return "" }); err != nil || c.HostDecode || c.GDALCOG || c.Device.PTX != "" {
		t.Errorf("none set: %+v, %v", c, err)
	}
	bad := map[string]string{"LULC_DEVICE_DECODE": "no", "LULC_DEVICE_LABELS": "on", "LULC_COG_ENCODER": "lulc", "LULC_PTX": filepath.Join(t.TempDir(), "none.ptx")}
	_, err = compareFromEnv(func(k string) string { return bad[k] })
	for _, want := range []string{`LULC_DEVICE_DECODE="no"`, `LULC_DEVICE_LABELS="on"`, `"off"`, `LULC_COG_ENCODER="lulc"`, "LULC_PTX", "none.ptx"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad values: %v, want it to name %s", err, want)
		}
	}
}
