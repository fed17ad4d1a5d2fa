// Checks an exported lulc model against lulc's own predictions with
// onnxruntime-node: the CI twin of scripts/onnx-verify.py, which needs
// Python's onnxruntime (on the GPU host only). Run it through
// scripts/onnx-node, which installs onnxruntime-node and sets NODE_PATH.
//
// Usage: node onnx-node-check.mjs MODEL.onnx SAMPLES.npz
//
// SAMPLES.npz is `lulc export samples --model M` of the same model. On the
// validation rows (split 1) it runs the model and prints the row count, the
// labels that differ (and how many are exact ties in lulc's probabilities,
// where summation order may pick either class) and the largest probability
// difference. Exits 1 when a label differs outside a tie or a probability
// by more than 1e-5, as onnx-verify.py does.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { inflateRawSync } from 'node:zlib';

// ES modules ignore NODE_PATH; a CommonJS require honours it, so the
// package can live in a cache outside the repository.
const ort = createRequire(import.meta.url)('onnxruntime-node');

// readZip returns the entries of a zip archive by name. It reads the
// central directory, as Go's zip writer (lulc's .npz) leaves the sizes out
// of the local headers.
function readZip(buf) {
  let eocd = buf.length - 22;
  while (eocd >= 0 && buf.readUInt32LE(eocd) !== 0x06054b50) eocd--;
  if (eocd < 0) throw new Error('not a zip archive');
  const files = new Map();
  let p = buf.readUInt32LE(eocd + 16);
  for (let n = buf.readUInt16LE(eocd + 10); n > 0; n--) {
    if (buf.readUInt32LE(p) !== 0x02014b50) throw new Error('bad zip central directory');
    const method = buf.readUInt16LE(p + 10);
    const size = buf.readUInt32LE(p + 20);
    const nameLen = buf.readUInt16LE(p + 28);
    const local = buf.readUInt32LE(p + 42);
    const name = buf.toString('utf8', p + 46, p + 46 + nameLen);
    if (size === 0xffffffff || local === 0xffffffff) throw new Error(`${name}: zip64 entries are not supported`);
    const start = local + 30 + buf.readUInt16LE(local + 26) + buf.readUInt16LE(local + 28);
    const data = buf.subarray(start, start + size);
    if (method === 0) files.set(name, data);
    else if (method === 8) files.set(name, inflateRawSync(data));
    else throw new Error(`${name}: zip method ${method} is not supported`);
    p += 46 + nameLen + buf.readUInt16LE(p + 30) + buf.readUInt16LE(p + 32);
  }
  return files;
}

const types = { '<f4': Float32Array, '<i8': BigInt64Array, '|u1': Uint8Array };

// readNpy decodes a little-endian, C-ordered .npy of the dtypes above.
function readNpy(name, buf) {
  if (buf.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${name}: not an .npy`);
  const [hlen, at] = buf[6] === 1 ? [buf.readUInt16LE(8), 10] : [buf.readUInt32LE(8), 12];
  const header = buf.toString('latin1', at, at + hlen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)?.[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)?.[1].split(',').filter((s) => s.trim()).map(Number);
  if (!types[descr] || !shape || !/'fortran_order':\s*False/.test(header)) {
    throw new Error(`${name}: unsupported .npy header ${header.trim()}`);
  }
  // A copy: typed arrays need their element alignment, which the offset
  // inside the archive does not give.
  const bytes = buf.subarray(at + hlen);
  return { data: new types[descr](new Uint8Array(bytes).buffer), shape };
}

async function main(modelPath, npzPath) {
  const zip = readZip(readFileSync(npzPath));
  const z = (name) => {
    const f = zip.get(`${name}.npy`);
    if (!f) throw new Error(`${npzPath} has no ${name}.npy (lulc_* need lulc export samples --model)`);
    return readNpy(name, f);
  };
  const split = z('split').data;
  const features = z('features');
  const wantLabel = z('lulc_label').data;
  const wantProb = z('lulc_probability');
  const nf = features.shape[1];
  const k = wantProb.shape[1];
  const rows = [];
  split.forEach((s, i) => s === 1 && rows.push(i));
  const x = new Float32Array(rows.length * nf);
  rows.forEach((r, i) => x.set(features.data.subarray(r * nf, (r + 1) * nf), i * nf));
  const sess = await ort.InferenceSession.create(modelPath, { executionProviders: ['cpu'] });
  const out = await sess.run({ features: new ort.Tensor('float32', x, [rows.length, nf]) });
  const label = out.label.data;
  const prob = out.probabilities.data;
  let differ = 0;
  let ties = 0;
  let err = 0;
  rows.forEach((r, i) => {
    const want = wantProb.data.subarray(r * k, (r + 1) * k);
    for (let c = 0; c < k; c++) err = Math.max(err, Math.abs(prob[i * k + c] - want[c]));
    if (label[i] !== wantLabel[r]) {
      differ++;
      const top = Array.from(want).sort((a, b) => b - a);
      if (top[0] - top[1] <= 1e-6) ties++;
    }
  });
  console.log(
    `onnxruntime-node ${ort.env.versions.node}: ${rows.length} validation rows, ${differ} labels differ ` +
      `(${ties} of them ties), largest probability difference ${err.toExponential(2)}`,
  );
  if (rows.length === 0) {
    console.error(`${npzPath}: no validation rows`);
    return 1;
  }
  if (differ > ties || err > 1e-5) {
    console.error(
      `${modelPath}: onnxruntime-node disagrees with lulc: ${differ - ties} labels outside ties ` +
        `(want 0), probabilities ${err.toExponential(2)} apart (want at most 1e-5)`,
    );
    return 1;
  }
  return 0;
}

if (process.argv.length !== 4) {
  console.error('usage: node onnx-node-check.mjs MODEL.onnx SAMPLES.npz');
  process.exit(2);
}
main(process.argv[2], process.argv[3]).then(
  (code) => process.exit(code),
  (e) => {
    console.error(`onnx-node-check: ${e.message}`);
    process.exit(1);
  },
);
