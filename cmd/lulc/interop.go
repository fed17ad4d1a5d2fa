package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/lulc/lulc/internal/atomicfs"
	"github.com/lulc/lulc/learn/forest"
	"github.com/lulc/lulc/learn/sampleset"
	"github.com/lulc/lulc/pipeline"
	"github.com/lulc/lulc/report/interop"
)

func newExportCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export model|samples",
		Short: "Write a model as ONNX-ML or samples as NumPy .npz, for Python",
		Long: `export writes lulc's files in formats the Python world opens:

  lulc export model --model RUN/model.lulcrf --out model.onnx
      the forest as an ONNX-ML TreeEnsembleClassifier (ai.onnx.ml opset 3) on raw
      feature values: onnxruntime gives lulc's classes and probabilities;
  lulc export samples --samples RUN/samples.lulcs --out samples.npz [--model M]
      the samples as a NumPy .npz (features, labels, split, weights, pixel ids,
      feature names, class codes), with --model also lulc's predictions of each row.

An existing output file is replaced only with --force, and never one of the
command's inputs, a directory, a device, a FIFO or a symbolic link.

See docs/export.md for Python snippets.`,
		Args: noArgs,
	}
	cmd.AddCommand(newExportModelCmd(a), newExportSamplesCmd(a))
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
			m, _, err := pipeline.LoadModel(model)
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
				if m, _, err = pipeline.LoadModel(model); err != nil {
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
