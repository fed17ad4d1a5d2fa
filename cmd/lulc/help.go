package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/lulc/lulc/configs"
)

// examples are each command's Examples section, by command path: command
// lines a user can paste (the embedded configs, the tiny scene), checked
// by TestHelpExamples against the commands' own flags.
var examples = map[string]string{
	"lulc version": `  lulc version`,
	"lulc synth": `  lulc synth --out scene                        # the tiny demo scene (synth-tiny.yaml)
  lulc synth -c synth-full.yaml --out full      # a full 10980² tile, two dates`,
	"lulc ingest": `  lulc ingest --catalog scene/catalog.json --out stack
  lulc ingest -c ingest-earth-search.yaml --out stack --device gpu`,
	"lulc train": `  lulc train --stack stack --out model
  lulc train -c train-demo.yaml --stack stack --out model --compare sklearn`,
	"lulc predict": `  lulc predict --model model/model.lulcrf --input stack --out map
  lulc predict --model model/model.lulcrf --catalog scene/catalog.json --out map --confidence`,
	"lulc evaluate": `  lulc evaluate --prediction map/31TEJ/class.tif --labels stack/31TEJ/labels.tif --out eval`,
	"lulc plan":     `  lulc plan -c run-demo.yaml --catalog scene/catalog.json --out plan.json`,
	"lulc run": `  lulc run --catalog scene/catalog.json --out run                # the demo job, one pass
  lulc run -c run-full-tile.yaml --catalog full/catalog.json --out run --device gpu:all
  lulc run -c run-demo.yaml --plan plan.json --shard 0/4 --out job  # one task of four`,
	"lulc collect":        `  lulc collect --out job                          # after every task of job/ finished`,
	"lulc export model":   `  lulc export model --model model/model.lulcrf --out model.onnx`,
	"lulc export samples": `  lulc export samples --samples model/samples.lulcs --model model/model.lulcrf --out samples.npz`,
	"lulc export chips":   `  lulc export chips -c train-demo.yaml --stack stack --size 256 --out chips`,
	"lulc import classes": `  lulc import classes --chips chips --tile 31TEJ --array pred.npy --out unet/31TEJ/class.tif`,
	"lulc doctor":         `  lulc doctor`,
	"lulc validate": `  lulc validate run                              # a run's collection, items and files
  lulc validate scene/catalog.json
  lulc validate --base-url https://data.example.org/maps maps   # a run written with that --base-url`,
	"lulc bench": `  lulc bench --out bench                          # the demo job per engine
  lulc bench -c bench-full-tile.yaml --engines cpu,gpu --out bench`,
	"lulc bench forest":        `  lulc bench forest --out forest --engines cpu,golearn`,
	"lulc bench decode":        `  lulc bench decode scene --out decode --device gpu`,
	"lulc bench temporal-real": `  lulc bench temporal-real --data ../shared/data/eolearn-slovenia-testpatch --out temporal`,
	"lulc config":              `  lulc config list`,
	"lulc config list":         `  lulc config list`,
	"lulc config show": `  lulc config show run-demo.yaml
  lulc config show --defaults train              # every train key with its default`,
	"lulc view": `  lulc view run                                   # opens a browser on the run's maps
  lulc view map --no-browser --port 0 --labels stack/31TEJ/labels.tif`,
}

// environmentHelp is the root help's section on the environment.
const environmentHelp = `

Environment:
  LULC_<FLAG>          any flag, upper case, dashes as underscores (LULC_DEVICE=gpu,
                       LULC_OUT=…, LULC_QUIET=1); the command line wins
  Array jobs (lulc run --phase, --shard i/n; docs/scale.md):
    SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_COUNT, SLURM_ARRAY_TASK_MIN   Slurm
    JOB_COMPLETION_INDEX with LULC_SHARD_COUNT                          Kubernetes
    AWS_BATCH_JOB_ARRAY_INDEX, AWS_BATCH_JOB_ARRAY_SIZE                 AWS Batch
    COILED_BATCH_TASK_ID with LULC_SHARD_COUNT                          Coiled
  Object storage (s3:// outputs and inputs): AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
    AWS_SESSION_TOKEN, AWS_REGION, AWS_S3_ENDPOINT, AWS_HTTPS, AWS_VIRTUAL_HOSTING
  Comparing lulc's way with another (docs/gpu.md): LULC_DEVICE_DECODE=off,
    LULC_DEVICE_DRAW=off, LULC_DEVICE_AOA=off, LULC_DEVICE_LABELS=off, LULC_DEVICE_STAGING=off,
    LULC_TRAIN_PROFILE=1,
    LULC_FOREST_SWEEP=off, LULC_AOA_SPLIT=off, LULC_AOA_SHARED=off, LULC_WINDOW_ASIDE=off,
    LULC_STREAMS_APART=off, LULC_CUDA_SPIN=off, LULC_ROWS_APART=off, LULC_MAP_BESIDE=off,
    LULC_EARLY_MAPS=off, LULC_LANE_CORES=all, LULC_REMOTE_AHEAD=off,
    LULC_MAP_MIRROR=off,
    LULC_COG_ENCODER=gdal,
    LULC_PTX=FILE (load PTX instead of the embedded kernels)
  Profiling: LULC_CPUPROFILE=FILE, LULC_TRACE=FILE, LULC_MEMPROFILE=FILE`

// deviceValues complete --device.
var deviceValues = []string{
	"auto\ta usable GPU, else the CPU", "cpu\tthe host's cores", "gpu\tthe first GPU",
	"gpu:all\tevery GPU", "gpu:0\tGPU 0", "gpu:1\tGPU 1",
}

// configPrefixes are, by command path, the names of the embedded configs
// a command's --config takes.
var configPrefixes = map[string]string{
	"lulc synth": "synth-", "lulc ingest": "ingest-", "lulc train": "train-", "lulc predict": "predict-",
	"lulc plan": "run-", "lulc run": "run-", "lulc export chips": "train-", "lulc bench": "bench-",
	"lulc bench forest": "bench-forest-",
}

// addHelp gives every command of the tree its examples and root its
// environment section, and completes --device and --config: the
// device forms, and the embedded configs of the command's kind (files
// complete too).
func addHelp(root *cobra.Command) {
	root.Long += environmentHelp
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		path := c.CommandPath()
		if ex, ok := examples[path]; ok {
			c.Example = ex
		}
		if c.Flags().Lookup("device") != nil {
			c.RegisterFlagCompletionFunc("device", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
				return deviceValues, cobra.ShellCompDirectiveNoFileComp
			})
		}
		if prefix, ok := configPrefixes[path]; ok && c.Flags().Lookup("config") != nil {
			c.RegisterFlagCompletionFunc("config", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
				var names []string
				for _, n := range configs.Names() {
					if strings.HasPrefix(n, prefix) && (prefix != "bench-" || !strings.HasPrefix(n, "bench-forest-")) {
						names = append(names, n)
					}
				}
				return names, cobra.ShellCompDirectiveDefault
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
