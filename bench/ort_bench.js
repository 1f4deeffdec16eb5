#!/usr/bin/env node
// Times one ONNX model with ONNX Runtime (CPU) from the npm package onnxruntime-node, the way
// `kiln bench` times it: a warm-up, then N timed runs, one JSON line with median_ms / min_ms.
//
// Usage: node bench/ort_bench.js MODEL [--threads T] [--iterations N] [--warmup W]
//            [--shape NAME=D0,D1,...]... [--input NAME=FILE.npy]... [--node-modules DIR]
//            [--dump DIR] [--profile [N]]
// The session is created with {intraOpNumThreads: T, interOpNumThreads: 1, executionMode:
// 'sequential', graphOptimizationLevel: 'all'}; everything else is ORT's default (its intra-op
// threads spin while waiting, as they do out of the box). Inputs are deterministic pseudo-random
// data in [-1, 1) (integer inputs: 0), with symbolic dims fixed by --shape (else 1), or --input's
// float32 .npy file (little-endian, C order), as `kiln run --input` reads.
// DIR defaults to build/host_speed/node_modules (bench/host_speed.py installs it there).
// --dump DIR writes every input and output (float32 only) as DIR/input_<k>.npy / output_<k>.npy
// plus DIR/inputs.json (the input names in order), so another runtime can be checked against ORT.
// --profile turns on ORT's profiler for the timed runs and prints, to stderr, ms per run by op type
// and the N slowest nodes (default 10) with their output shapes, in the layout of `kiln bench
// --profile`, so the two can be read side by side (the timings then include the profiler's cost).
'use strict';
const path = require('path');

function usage(msg) {
  process.stderr.write(`ort_bench.js: ${msg}\n`);
  process.exit(1);
}

function parseArgs(argv) {
  const o = {threads: 1, iterations: 20, warmup: 2, shapes: {}, inputs: {}, model: null,
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
    else if (a === '--profile') {
      o.profile = 10;
      if (i + 1 < argv.length && /^[0-9]+$/.test(argv[i + 1])) o.profile = parseInt(argv[++i], 10);
    }
    else if (a === '--shape') {
      const s = next();
      const eq = s.lastIndexOf('=');
      if (eq <= 0) usage(`bad --shape ${s} (want NAME=D0,D1,...)`);
      o.shapes[s.slice(0, eq)] = s.slice(eq + 1).split(',').map((d) => parseInt(d, 10));
    } else if (a === '--input') {
      const s = next();
      const eq = s.lastIndexOf('=');
      if (eq <= 0) usage(`bad --input ${s} (want NAME=FILE.npy)`);
      o.inputs[s.slice(0, eq)] = s.slice(eq + 1);
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

// A float32 .npy file (format 1.x or 2.x, '<f4', C order) as an ORT tensor.
function readNpy(ort, file) {
  const buf = require('fs').readFileSync(file);
  if (buf.length < 10 || buf.toString('latin1', 1, 6) !== 'NUMPY') usage(`${file}: not a .npy file`);
  const major = buf[6];
  const len = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12) + len;
  const header = buf.toString('latin1', major === 1 ? 10 : 12, start);
  const descr = /'descr':\s*'([^']*)'/.exec(header);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header);
  if (!descr || descr[1] !== '<f4' || /'fortran_order':\s*True/.test(header) || !shape)
    usage(`${file}: only little-endian float32 in C order is read`);
  const dims = shape[1].split(',').filter((d) => d.trim() !== '').map((d) => parseInt(d, 10));
  const n = dims.reduce((a, b) => a * b, 1);
  if (buf.length !== start + 4 * n) usage(`${file}: ${buf.length - start} data bytes for ${n} floats`);
  const data = new Float32Array(n);
  for (let i = 0; i < n; ++i) data[i] = buf.readFloatLE(start + 4 * i);
  return new ort.Tensor('float32', data, dims);
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
  const fs = require('fs');
  const os = require('os');
  const profileDir = o.profile !== undefined ? fs.mkdtempSync(path.join(os.tmpdir(), 'ort_profile_')) : null;
  const session = await ort.InferenceSession.create(o.model, {
    intraOpNumThreads: o.threads, interOpNumThreads: 1, executionMode: 'sequential',
    graphOptimizationLevel: 'all', enableProfiling: o.profile !== undefined,
    profileFilePrefix: profileDir ? path.join(profileDir, 'ort') : undefined,
  });
  for (const name of Object.keys(o.inputs))
    if (!session.inputNames.includes(name)) usage(`--input ${name}: the model has no such input`);
  const feeds = {};
  session.inputMetadata.forEach((meta, k) => {
    const dims = o.shapes[meta.name] ||
        (meta.shape || []).map((d) => (typeof d === 'number' && d >= 0 ? d : 1));
    feeds[meta.name] = o.inputs[meta.name] ? readNpy(ort, o.inputs[meta.name])
                                           : makeInput(ort, meta, dims, k + 1);
  });
  if (o.dump) {
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
  if (profileDir) {
    session.endProfiling();
    const file = fs.readdirSync(profileDir).find((f) => f.endsWith('.json'));
    if (!file) usage('--profile: ORT wrote no profile');
    printProfile(JSON.parse(fs.readFileSync(path.join(profileDir, file), 'utf8')),
                 o.warmup + o.iterations, o.profile);
    fs.rmSync(profileDir, {recursive: true, force: true});
  }
  await session.release();
}

// ORT's profile (Chrome trace events): every kernel run is a "Node" event named
// "<node>_kernel_time" with its duration in microseconds and the op type in args.op_name.
function printProfile(events, runs, shown) {
  const byOp = new Map();
  const byNode = new Map();
  let total = 0;
  for (const e of events) {
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time')) continue;
    const node = e.name.slice(0, -'_kernel_time'.length);
    const op = (e.args && e.args.op_name) || '?';
    const ms = e.dur / 1e3 / runs;
    const a = byOp.get(op) || {nodes: new Set(), ms: 0};
    a.nodes.add(node);
    a.ms += ms;
    byOp.set(op, a);
    const shape = e.args && e.args.output_type_shape && e.args.output_type_shape[0];
    const dims = shape ? Object.values(shape)[0].join('x') : '?';
    const n = byNode.get(node) || {op, ms: 0, dims};
    n.ms += ms;
    byNode.set(node, n);
    total += ms;
  }
  const pad = (x, w) => String(x).padEnd(w);
  const lines = [`${pad('op', 32)} ${'nodes'.padStart(5)} ${'ms/run'.padStart(10)} ${'%'.padStart(6)}`];
  for (const [op, a] of [...byOp].sort((x, y) => y[1].ms - x[1].ms))
    lines.push(`${pad(op, 32)} ${String(a.nodes.size).padStart(5)} ${a.ms.toFixed(4).padStart(10)} ` +
               `${(total > 0 ? 100 * a.ms / total : 0).toFixed(1).padStart(5)}%`);
  lines.push('slowest nodes:');
  for (const [node, n] of [...byNode].sort((x, y) => y[1].ms - x[1].ms).slice(0, shown))
    lines.push(`  ${n.ms.toFixed(4).padStart(10)} ms  ${pad(`node '${node}' (${n.op})`, 48)} ${n.dims}`);
  process.stderr.write(lines.join('\n') + '\n');
}

main().catch((e) => usage(e && e.message ? e.message : String(e)));
