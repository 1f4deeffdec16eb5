#!/usr/bin/env node
// Times one ONNX model with ONNX Runtime (CPU) from the npm package onnxruntime-node, the way
// `kiln bench` times it: a warm-up, then N timed runs, one JSON line with median_ms / min_ms.
//
// Usage: node bench/ort_bench.js MODEL [--threads T] [--iterations N] [--warmup W]
//            [--shape NAME=D0,D1,...]... [--node-modules DIR] [--dump DIR]
// The session is created with {intraOpNumThreads: T, interOpNumThreads: 1, executionMode:
// 'sequential', graphOptimizationLevel: 'all'}; everything else is ORT's default (its intra-op
// threads spin while waiting, as they do out of the box). Inputs are deterministic pseudo-random
// data in [-1, 1) (integer inputs: 0), with symbolic dims fixed by --shape (else 1).
// DIR defaults to build/host_speed/node_modules (bench/host_speed.py installs it there).
// --dump DIR writes every input and output (float32 only) as DIR/input_<k>.npy / output_<k>.npy
// plus DIR/inputs.json (the input names in order), so another runtime can be checked against ORT.
'use strict';
const path = require('path');

function usage(msg) {
  process.stderr.write(`ort_bench.js: ${msg}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  const o = {threads: 1, iterations: 20, warmup: 2, shapes: {}, model: null,
             nodeModules: path.join(__dirname, '..', 'build', 'host_speed', 'node_modules')};
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--threads') o.threads = parseInt(next(), 10);
    else if (a === '--iterations') o.iterations = parseInt(next(), 10);
    else if (a === '--warmup') o.warmup = parseInt(next(), 10);
    else if (a === '--node-modules') o.nodeModules = next();
    else if (a === '--dump') o.dump = next();
    else if (a === '--shape') {
      const s = next();
      const eq = s.lastIndexOf('=');
      if (eq <= 0) usage(`bad --shape ${s} (want NAME=D0,D1,...)`);
      o.shapes[s.slice(0, eq)] = s.slice(eq + 1).split(',').map((d) => parseInt(d, 10));
    } else if (a.startsWith('--')) usage(`unknown option ${a}`);
    else if (o.model === null) o.model = a;
    else usage(`unexpected argument ${a}`);
  }
  if (o.model === null) usage('no MODEL given');
  if (!(o.threads >= 1) || !(o.iterations >= 1) || !(o.warmup >= 0)) usage('bad number');
  return o;
}

const TYPED = {
  float32: Float32Array, float64: Float64Array, int32: Int32Array, int64: BigInt64Array,
  int8: Int8Array, uint8: Uint8Array, int16: Int16Array, uint16: Uint16Array, bool: Uint8Array,
};

function makeInput(ort, meta, dims, seed) {
  const Ctor = TYPED[meta.type];
  if (!Ctor) usage(`input ${meta.name}: type ${meta.type} not supported`);
  const n = dims.reduce((a, b) => a * b, 1);
  const data = new Ctor(n);
  if (Ctor === Float32Array || Ctor === Float64Array) {
    let s = (seed * 2654435761) >>> 0;  // xorshift32: deterministic, no dependency
    for (let i = 0; i < n; ++i) {
      s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
      data[i] = (s / 4294967296) * 2 - 1;
    }
  }
  return new ort.Tensor(meta.type, data, dims);
}

// A float32 tensor as a .npy file (format 1.0, little-endian, C order).
function writeNpy(file, tensor) {
  const fs = require('fs');
  if (tensor.type !== 'float32') usage(`--dump: ${file}: type ${tensor.type} is not float32`);
  const shape = tensor.dims.length === 1 ? `(${tensor.dims[0]},)` : `(${tensor.dims.join(', ')})`;
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': ${shape}, }`;
  header += ' '.repeat(63 - ((10 + header.length) % 64)) + '\n';
  const pre = Buffer.alloc(10);
  Buffer.from([0x93]).copy(pre, 0);
  pre.write('NUMPY', 1, 'latin1');
  pre[6] = 1;
  pre[7] = 0;
  pre.writeUInt16LE(header.length, 8);
  const data = Buffer.from(tensor.data.buffer, tensor.data.byteOffset, tensor.data.byteLength);
  fs.writeFileSync(file, Buffer.concat([pre, Buffer.from(header, 'latin1'), data]));
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  let ort;
  try {
    ort = require(path.join(path.resolve(o.nodeModules), 'onnxruntime-node'));
  } catch (e) {
    usage(`cannot load onnxruntime-node from ${o.nodeModules}: ${e.message}`);
  }
  const session = await ort.InferenceSession.create(o.model, {
    intraOpNumThreads: o.threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all',
  });
  const feeds = {};
  session.inputMetadata.forEach((meta, k) => {
    const dims = o.shapes[meta.name] ||
        (meta.shape || []).map((d) => (typeof d === 'number' && d >= 0 ? d : 1));
    feeds[meta.name] = makeInput(ort, meta, dims, k + 1);
  });
  if (o.dump) {
    const fs = require('fs');
    fs.mkdirSync(o.dump, {recursive: true});
    const results = await session.run(feeds);
    session.inputNames.forEach((n, k) => writeNpy(path.join(o.dump, `input_${k}.npy`), feeds[n]));
    session.outputNames.forEach((n, k) => writeNpy(path.join(o.dump, `output_${k}.npy`), results[n]));
    fs.writeFileSync(path.join(o.dump, 'inputs.json'), JSON.stringify(session.inputNames) + '\n');
  }
  for (let w = 0; w < o.warmup; ++w) await session.run(feeds);
  const ms = [];
  for (let i = 0; i < o.iterations; ++i) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
  }
  ms.sort((a, b) => a - b);
  process.stdout.write(JSON.stringify({
    model: o.model, runtime: `onnxruntime-node ${ort.env.versions.node}`, threads: o.threads,
    iterations: o.iterations, median_ms: ms[ms.length >> 1], min_ms: ms[0],
    max_ms: ms[ms.length - 1],
  }) + '\n');
  await session.release();
}

main().catch((e) => usage(e && e.message ? e.message : String(e)));
