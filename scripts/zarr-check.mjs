// Reads a Zarr v3 store with zarrita (npm) and writes each array's values
// as raw little-endian bytes (NAME.bin) and its shape, data type and
// attributes (arrays.json) into a directory, so that lulc's tests compare
// them with the COG stack's values read through GDAL.
//
//   node scripts/zarr-check.mjs STORE OUTDIR
//
// Run through scripts/zarr-check, which installs zarrita.
import * as zarr from "zarrita";
import { FileSystemStore } from "@zarrita/storage";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [store, out] = process.argv.slice(2);
if (!store || !out) {
  console.error("usage: node scripts/zarr-check.mjs STORE OUTDIR");
  process.exit(2);
}
mkdirSync(out, { recursive: true });
const root = await zarr.open(new FileSystemStore(store), { kind: "group" });
// zarrita does not list a group's children: the arrays are those the
// group's consolidated metadata names, each then opened through zarrita.
const group = JSON.parse(readFileSync(join(store, "zarr.json"), "utf8"));
const names = Object.keys(group.consolidated_metadata?.metadata ?? {}).sort();
if (names.length === 0) {
  console.error(`${store}: the group's consolidated metadata lists no arrays`);
  process.exit(1);
}
const summary = {};
for (const name of names) {
  const arr = await zarr.open(root.resolve(name), { kind: "array" });
  let data = (await zarr.get(arr)).data;
  if (arr.shape.length === 0) {
    // A scalar reads as a value, not an array.
    const value = await zarr.get(arr);
    data = { int32: Int32Array, float64: Float64Array, uint16: Uint16Array, uint8: Uint8Array }[arr.dtype].of(Number(value));
  }
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  writeFileSync(join(out, `${name}.bin`), bytes);
  summary[name] = { shape: arr.shape, dtype: arr.dtype, chunks: arr.chunks, attrs: arr.attrs, group: root.attrs };
}
writeFileSync(join(out, "arrays.json"), JSON.stringify(summary, null, 1));
console.log(`zarrita read ${names.length} arrays of ${store}`);
