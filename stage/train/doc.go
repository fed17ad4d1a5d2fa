// Package train draws labelled pixels from stacks and grows the forest:
// the inputs of a train config (stack directories, raster files, or a
// sharded job's draws), the stratified, block-split draw through package
// sampling on the engine, the classes' census and warnings, the forest fit
// and validated on the engine (or by golearn through Options.Golearn), and
// the model, samples, metrics and charts written as one committed output.
package train
