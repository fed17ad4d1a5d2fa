// Package pipeline orders lulc's stages (ingest, sample, train, predict,
// bench), owns run directories, manifests and resumption, and computes no
// pixels itself. Stages arrive with their commands; `lulc synth` uses the
// synth package directly and internal/atomicfs for its staged, resumable
// output.
package pipeline
