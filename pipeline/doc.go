// Package pipeline is lulc's job layer: it composes the stages of
// package stage's subpackages into jobs. Run maps every tile of a job in
// one pass per tile with the composite in memory (a tile composited for
// the map alone predicted beside its composite, row by row), on
// tiles_per_gpu lanes of tiles per GPU; MakePlan resolves a job's tiles once for an array job, Run maps one
// task's share (Job.Shard), RunTask and RunTrain do so with their output
// and inputs in object storage, and Collect gathers the tasks (RunCollect:
// from object storage too). It owns the run's directory, resumption and
// report, and computes no pixels itself.
package pipeline
