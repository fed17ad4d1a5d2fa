// Package inference predicts land cover window by window: a streaming
// read → features → predict → write pipeline with CPU and GPU predictors.
// It knows nothing about STAC. The pipeline arrives with `lulc predict`;
// until then the package holds only this description of its role.
package inference
