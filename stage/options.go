package stage

import (
	"log/slog"
	"net/http"
	"runtime"

	"github.com/lulc/lulc/device/cuda"
	"github.com/lulc/lulc/internal/progress"
)

// Options are what every stage run shares.
type Options struct {
	Out   string // final output directory
	Force bool
	// BreakLock takes over the output's lock whoever holds it (see
	// atomicfs.Lock): for a writer on another host known to be gone.
	BreakLock bool
	Log       *slog.Logger
	NewBar    progress.NewBar
	Version   string // lulc version, recorded in manifests
	// BaseURL, when set (--base-url, checked with CheckBaseURL), is where
	// the output will be published: its STAC documents' links and assets
	// are absolute URLs under it (CollectionRef.Base).
	BaseURL string
	Workers int // windows processed at once (0: one per CPU)
	// HTTP is the client for STAC APIs and asset sizes (nil: default).
	HTTP *http.Client
	// GPUs, when set, run the GPU twins (composite, features, binning,
	// training, prediction); none computes on the CPU. A stage over one
	// tile uses the first; lulc run maps tiles on all of them at once,
	// and training shares its trees out over them.
	GPUs []*cuda.Device
	// Inputs are files the caller read besides those the stage's config
	// names (the config file itself): the output must not touch them.
	Inputs []string
	// Compare makes lulc work another way than its own, for comparing
	// both on one machine.
	Compare Compare
	// Golearn fits golearn's forest for train configs whose engine is
	// golearn (nil: such configs are refused).
	Golearn Golearn
	// Charts draws the stages' PNGs: confusion matrices, feature
	// importance and quicklooks (nil: none are written).
	Charts Charts
	// Hooks are set by this package's tests only.
	Hooks Hooks
}

// Compare holds switches that make lulc work another way than its own,
// for comparing both on one machine (the command line sets them from
// LULC_* variables: docs/gpu.md); the zero value is lulc's way.
type Compare struct {
	HostDecode bool // decode tiles on the host with a device (LULC_DEVICE_DECODE=off)
	HostDraw   bool // draw samples on the host with a device (LULC_DEVICE_DRAW=off)
	HostAOA    bool // measure the AOA's training points on the host with a device (LULC_DEVICE_AOA=off)
	HostLabels bool // map label rasters onto the grid on the host with a device (LULC_DEVICE_LABELS=off)
	// ApartAOA measures a window's AOA from its own upload and features
	// pass, apart from its prediction's (LULC_AOA_SHARED=off).
	ApartAOA bool
	GDALCOG  bool // write COGs with GDAL's driver (LULC_COG_ENCODER=gdal)
	// MapAfterComposite has lulc run predict a tile it composites for
	// the map only after the composite ends, not row by row beside it
	// (LULC_MAP_BESIDE=off).
	MapAfterComposite bool
	// LateMaps has a prediction compress its class and confidence COGs
	// whole when its stream ends, not row by row as the stream completes
	// them (LULC_EARLY_MAPS=off).
	LateMaps bool
	// LaneAllCores has every lane of a run on several GPUs work its
	// windows on all the cores, not its GPU's share (LULC_LANE_CORES=all).
	LaneAllCores bool
	// RemoteGDAL has the CPU read remote bands through GDAL window by
	// window, not compressed rows of windows ahead (LULC_REMOTE_AHEAD=off).
	RemoteGDAL bool
	// HostWindows has lulc run's GPU prediction send each window's DNs up
	// from the host's stack, not read them from the device's copy of the
	// composite (LULC_MAP_MIRROR=off).
	HostWindows bool
	// Device is the settings of devices a stage opens itself (lulc
	// bench's GPU engine).
	Device cuda.Options
}

// Fill sets the options left unset to their defaults: a logger that
// discards, no progress bars, one worker per CPU and a shared HTTP client.
// Every stage calls it; code that composes stages calls it to use the
// options itself.
func (o *Options) Fill() {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	o.NewBar = progress.OrNop(o.NewBar)
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.HTTP == nil {
		o.HTTP = defaultHTTP
	}
}

// defaultHTTP is the client of options that name none, shared so that
// its connections are: it keeps as many idle connections to a host as
// requests go to it at once (a manifest's HEADs, DescribeAssets), where
// Go's default keeps two and closes the rest after each burst.
var defaultHTTP = func() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = describeAtOnce
	return &http.Client{Transport: t}
}()

// Stack encoding of the reflectance COG: UInt16 digital numbers with
// reflectance = DN × StackScale + StackOffset (baseline-04 convention),
// 0 = no valid observation.
const (
	StackScale  = 0.0001
	StackOffset = -0.1
)

// Ptr returns a pointer to a copy of v.
func Ptr[T any](v T) *T { return &v }

// Golearn fits golearn's random forest (train config engine: golearn, the
// CPU baseline the workflow compares with): trees of featuresPerTree
// features each on rows x of nf features and their classes y, seeded.
// golearn needs cgo and is no part of lulc's core: the commands and the
// bench set Options.Golearn to package baseline's (bench.Golearn).
type Golearn func(x []float32, nf int, y []uint8, classes, trees, featuresPerTree int, seed int64) (GolearnForest, error)

// GolearnForest is a fitted golearn forest: it classifies rows of nf
// features.
type GolearnForest interface {
	Predict(x []float32, nf int) ([]uint8, error)
}

// Hooks let this package's tests take paths that runs take only on other
// machines or when something fails, through Options rather than package
// variables, so that tests may run in parallel.
type Hooks struct {
	// RawOnCPU makes the CPU engine take bands compressed too, decoded by
	// package decode in composite.Resample: the path of a device that
	// decodes (reading ahead included), without one.
	RawOnCPU bool
	// AheadBudget replaces the read-ahead's budget when positive.
	AheadBudget int64
	// AheadFail makes reading row aheadFail − 1 ahead fail (0: none).
	AheadFail int
	// CpuLanes is how many tiles the CPU computes at once (0: one).
	CpuLanes int
}
