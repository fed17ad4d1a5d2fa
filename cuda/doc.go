// Package cuda drives NVIDIA GPUs through the driver API loaded at run time
// (no CUDA toolkit at build time) and holds the GPU twins of lulc's compute
// stages: features, compositing, binning, forest training and prediction.
//
// It must build with CGO_ENABLED=0 so that its test binaries run on GPU
// hosts without GDAL; .ci/run checks this. The driver bindings and kernels
// arrive with the CUDA stage; until then the package holds only this
// description of its role.
package cuda
