package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/learn/sampleset"
	"github.com/lulc/lulc/report/interop"
	"github.com/lulc/lulc/stage"
	"github.com/lulc/lulc/stage/chips"
	"github.com/lulc/lulc/stage/config"
	"github.com/lulc/lulc/stage/predict"
)

func newExportCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export model|samples|chips",
		Short: "Write a model as ONNX-ML, samples as NumPy .npz, or a stack as chips for PyTorch",
		Long: `export writes lulc's files in formats the Python world opens:

  lulc export model --model RUN/model.lulcrf --out model.onnx
      the forest as an ONNX-ML TreeEnsembleClassifier (ai.onnx.ml opset 3) on raw
      feature values: onnxruntime gives lulc's classes and probabilities;
  lulc export samples --samples RUN/samples.lulcs --out samples.npz [--model M]
      the samples as a NumPy .npz (features, labels, split, weights, pixel ids,
      feature names, class codes), with --model also lulc's predictions of each row;
  lulc export chips -c TRAIN_CONFIG --stack DIR --out CHIPS
      the stack cut into chips of the config's features with labels and the
      forest's split, as .npy files and chips.json (docs/chips.md).

An existing output file is replaced only with --force, and never one of the
command's inputs, a directory, a device, a FIFO or a symbolic link.

See docs/export.md for Python snippets.`,
		Args: noArgs,
	}
	cmd.AddCommand(newExportModelCmd(a), newExportSamplesCmd(a), newExportChipsCmd(a))
	return cmd
}

func newExportModelCmd(a *app) *cobra.Command {
	var model, out string
	var force bool
	cmd := &cobra.Command{
		Use:   "model --model model.lulcrf --out model.onnx [--force]",
		Short: "Write the forest as an ONNX-ML model",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if model == "" || out == "" {
				return usagef("--model and --out are required")
			}
			if err := checkFileOut(out, force, model); err != nil {
				return err
			}
			m, _, err := predict.LoadModel(model)
			if err != nil {
				return fmt.Errorf("export: %w", err)
			}
			body, err := interop.ONNX(m, lulcVersion())
			if err != nil {
				return fmt.Errorf("export: %w", err)
			}
			if err := writeExport(out, body); err != nil {
				return err
			}
			if a.summary(map[string]any{"onnx": out, "trees": len(m.Forest.Trees), "features": m.Features}) {
				fmt.Fprintf(a.stdout, "wrote %s: %d trees over %d features, %d classes\n", out, len(m.Forest.Trees), len(m.Features), len(m.Classes))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&model, "model", "", "the model (model.lulcrf)")
	cmd.Flags().StringVarP(&out, "out", "o", "", "the ONNX file to write")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing ONNX file")
	return cmd
}

func newExportSamplesCmd(a *app) *cobra.Command {
	var sampleFile, model, out string
	var force bool
	cmd := &cobra.Command{
		Use:   "samples --samples samples.lulcs --out samples.npz [--model model.lulcrf] [--force]",
		Short: "Write samples as a NumPy .npz",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if sampleFile == "" || out == "" {
				return usagef("--samples and --out are required")
			}
			if err := checkFileOut(out, force, sampleFile, model); err != nil {
				return err
			}
			raw, err := os.ReadFile(sampleFile)
			if err != nil {
				return fmt.Errorf("export: %w", err)
			}
			set, err := sampleset.Decode(raw)
			if err != nil {
				return fmt.Errorf("export: %s: %w", sampleFile, err)
			}
			if set.Draw != nil {
				return fmt.Errorf("export: %s is a sample phase's draw (band reflectances): export the samples lulc train writes", sampleFile)
			}
			var m *forest.Model
			if model != "" {
				if m, _, err = predict.LoadModel(model); err != nil {
					return fmt.Errorf("export: %w", err)
				}
			}
			var b bytes.Buffer
			if err := interop.NPZ(&b, set, m); err != nil {
				return fmt.Errorf("export: %w", err)
			}
			if err := writeExport(out, b.Bytes()); err != nil {
				return err
			}
			if a.summary(map[string]any{"npz": out, "rows": set.N(), "features": set.Features}) {
				fmt.Fprintf(a.stdout, "wrote %s: %d rows × %d features\n", out, set.N(), len(set.Features))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&sampleFile, "samples", "", "the samples (samples.lulcs from lulc train or lulc run)")
	cmd.Flags().StringVar(&model, "model", "", "also write this model's predictions of every row")
	cmd.Flags().StringVarP(&out, "out", "o", "", "the .npz file to write")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing .npz file")
	return cmd
}

func newExportChipsCmd(a *app) *cobra.Command {
	var cfgPath, stack, out string
	var size, stride int
	var force bool
	cmd := &cobra.Command{
		Use:   "chips -c TRAIN_CONFIG --stack DIR --out DIR [--size 256] [--stride ¾ of the size] [--force]",
		Short: "Cut a stack into chips of feature planes with labels and the forest's split, for PyTorch (docs/chips.md)",
		Long: `chips cuts an ingest stack into fixed-size chips of the train config's
features, with class indices and the forest's split pixel for pixel (train,
validation, buffer), as .npy files numpy loads memory-mapped, plus each
tile's whole planes to map it, and chips.json describing them
(docs/chips.md). Chips with no labelled pixel are dropped and counted. The
U-Net in unet/ trains on them; lulc import classes brings its maps back.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usagef("--out: no output directory given")
			}
			if !cmd.Flags().Changed("stride") {
				// Chips overlap by a quarter of their side unless told.
				stride = max(1, size*3/4)
			}
			if size < 8 || stride < 1 || stride > size {
				return usagef("--size %d and --stride %d: the size is at least 8 pixels, the stride 1 to the size", size, stride)
			}
			cfg, err := loadConfig(cfgPath, defaultTrainConfig, config.ParseTrainConfig)
			if err != nil {
				return err
			}
			if stack != "" {
				cfg.Input.Stack = stack
			}
			res, err := chips.ExportChips(cmd.Context(), chips.Config{Train: cfg, Size: size, Stride: stride},
				stage.Options{Out: out, Force: force, BreakLock: a.breakLock, Log: a.log, Inputs: []string{cfgPath}})
			if err != nil {
				return err
			}
			if a.summary(res) {
				dropped := 0
				for _, n := range res.Dropped {
					dropped += n
				}
				fmt.Fprintf(a.stdout, "wrote %d chips of %d² × %d planes into %s (%d without a labelled pixel left out) in %s\n",
					res.Chips, size, res.Planes, res.Dir, dropped, res.Elapsed.Round(time.Millisecond))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&cfgPath, "config", "c", "", "train config whose features, classes and split the chips carry (default: embedded "+defaultTrainConfig+")")
	cmd.Flags().StringVar(&stack, "stack", "", "ingest output to cut, overriding input.stack")
	cmd.Flags().IntVar(&size, "size", 256, "chip side in pixels")
	cmd.Flags().IntVar(&stride, "stride", 192, "step between chips in pixels (size − stride pixels overlap; default: three quarters of the size)")
	cmd.Flags().StringVarP(&out, "out", "o", "", "output directory (must not exist unless --force)")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing output directory")
	return cmd
}

// newImportCmd brings other tools' results back into lulc's formats.
func newImportCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "import classes",
		Short: "Bring another model's map back as a class COG (lulc import classes)",
		Args:  noArgs,
	}
	var chipsDir, tile, array, out string
	var force bool
	classes := &cobra.Command{
		Use:   "classes --chips DIR --tile NAME --array PRED.npy --out class.tif [--force]",
		Short: "Turn a model's class indices for a tile of a chips export into a class COG that lulc evaluate scores",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if chipsDir == "" || tile == "" || array == "" || out == "" {
				return usagef("--chips, --tile, --array and --out are required")
			}
			// The class COG is a file output like export's: never over an
			// input, an existing file without --force, or a device.
			if err := checkFileOut(out, force, chipsDir, array); err != nil {
				return err
			}
			if err := chips.ImportClasses(chipsDir, tile, array, out, stage.Options{Log: a.log}); err != nil {
				return err
			}
			if a.summary(map[string]any{"class": out, "tile": tile}) {
				fmt.Fprintf(a.stdout, "wrote %s (tile %s)\n", out, tile)
			}
			return nil
		},
	}
	classes.Flags().StringVar(&chipsDir, "chips", "", "the chips export the model was trained on (lulc export chips)")
	classes.Flags().StringVar(&tile, "tile", "", "the tile the array maps")
	classes.Flags().StringVar(&array, "array", "", "the class indices: a uint8 .npy of the tile's rows × columns (0: no class)")
	classes.Flags().StringVarP(&out, "out", "o", "", "the class COG to write")
	classes.Flags().BoolVar(&force, "force", false, "replace an existing class COG")
	cmd.AddCommand(classes)
	return cmd
}

// writeExport writes an export's file, creating its folder first: --out
// names a file in a folder that need not exist yet, as every other
// command's output may.
func writeExport(out string, body []byte) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("export: --out %s: %w", out, err)
	}
	if err := atomicfs.WriteFile(out, body); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}
