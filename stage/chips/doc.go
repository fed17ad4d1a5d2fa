// Package chips serves models trained outside lulc: ExportChips cuts a
// stack's feature planes into .npy chips with their class indices and the
// forest's split plane, and ImportClasses turns such a model's class
// indices for a tile back into a class COG that lulc evaluate scores
// (docs/chips.md).
package chips
