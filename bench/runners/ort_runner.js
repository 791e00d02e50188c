#!/usr/bin/env node
// ONNX Runtime (onnxruntime-node) side of the benchmark suite: one process = one round.
//   node ort_runner.js --model M.onnx --input NAME=FILE.npy ... --threads N --warmup W --runs R
//                      [--warmup-seconds S]  (untimed runs go on until S seconds have passed)
//                      [--outputs DIR]   (writes each output as DIR/<name>.npy)
// Session: intra-op threads N, inter-op 1, sequential execution, all graph optimisations.
// Prints one JSON line: load_ms, the timed runs' latencies (ms), their median.
'use strict';
const path = require('path');
const { readNpy, writeNpy } = require('./npy');

function parseArgs(argv) {
  const a = { inputs: [], threads: 1, warmup: 1, warmupSeconds: 0, runs: 3 };
  for (let i = 0; i < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1]];
    if (k === '--model') a.model = v;
    else if (k === '--input') a.inputs.push(v);
    else if (k === '--threads') a.threads = Number(v);
    else if (k === '--warmup') a.warmup = Number(v);
    else if (k === '--warmup-seconds') a.warmupSeconds = Number(v);
    else if (k === '--runs') a.runs = Number(v);
    else if (k === '--outputs') a.outputs = v;
    else throw new Error(`unknown option ${k}`);
  }
  if (!a.model) throw new Error('--model is required');
  return a;
}

function median(v) {
  const s = [...v].sort((x, y) => x - y);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  // GROVE_ORT_NODE: the installed onnxruntime-node package (bench/peers/install.sh).
  const ort = require(process.env.GROVE_ORT_NODE || 'onnxruntime-node');
  const feeds = {};
  for (const spec of a.inputs) {
    const eq = spec.indexOf('=');
    const t = readNpy(spec.slice(eq + 1));
    feeds[spec.slice(0, eq)] = new ort.Tensor(t.dtype, t.data, t.shape);
  }
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(a.model, {
    intraOpNumThreads: a.threads, interOpNumThreads: 1,
    executionMode: 'sequential', graphOptimizationLevel: 'all',
  });
  const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
  let out;
  const warmStart = process.hrtime.bigint();
  const warmSeconds = () => Number(process.hrtime.bigint() - warmStart) / 1e9;
  for (let i = 0; i < a.warmup || warmSeconds() < a.warmupSeconds; ++i) out = await session.run(feeds);
  const ms = [];
  for (let i = 0; i < a.runs; ++i) {
    const t = process.hrtime.bigint();
    out = await session.run(feeds);
    ms.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  if (a.outputs) {
    if (!out) out = await session.run(feeds);
    for (const name of session.outputNames) {
      const t = out[name];
      writeNpy(path.join(a.outputs, `${name}.npy`), t.type, t.dims, t.data);
    }
  }
  console.log(JSON.stringify({ engine: 'ort', version: ort.env.versions ? ort.env.versions.common : null,
    threads: a.threads, load_ms: loadMs, ms, median_ms: ms.length ? median(ms) : null }));
}

main().catch(e => { console.error(`ort_runner: ${e.message}`); process.exit(1); });
