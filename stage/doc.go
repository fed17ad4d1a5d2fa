// Package stage holds what lulc's stages share: Options (output, logging,
// workers, devices, the comparison switches, golearn and the charts
// hooks), the engine that computes their pixel work (Engine, implemented
// on the host's cores and on CUDA devices, chosen in one place:
// Options.Engine), the tile manifests every stage writes and reads, the
// names of the files they write, the STAC items and collections that
// describe them, and the area of applicability's sink. The stages
// themselves live in the packages below it (config, scenes, ingest,
// train, predict, evaluate, chips); pipeline composes them into jobs.
package stage
