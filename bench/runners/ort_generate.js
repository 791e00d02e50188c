#!/usr/bin/env node
// ONNX Runtime (onnxruntime-node) side of the decode benchmark: greedy generation with a
// decoder exported with its cache (bench/models/export_decoder_models.py), the presents of
// each step fed back as the next step's past (the loop an application writes around ORT).
//   node ort_generate.js --model M.onnx --prompt-ids 1,2,3 --new-tokens N --threads T [--warmup W]
// (W untimed generations first).
// Session: intra-op threads T, inter-op 1, sequential execution, all graph optimisations.
// Prints one JSON line: tokens, load_ms, prefill_ms, step_ms (every later step).
'use strict';

function parseArgs(argv) {
  const a = { threads: 1, newTokens: 16, warmup: 0 };
  for (let i = 0; i < argv.length; i += 2) {
    const [k, v] = [argv[i], argv[i + 1]];
    if (k === '--model') a.model = v;
    else if (k === '--prompt-ids') a.prompt = v.split(',').map(Number);
    else if (k === '--new-tokens') a.newTokens = Number(v);
    else if (k === '--threads') a.threads = Number(v);
    else if (k === '--warmup') a.warmup = Number(v);
    else throw new Error(`unknown option ${k}`);
  }
  if (!a.model || !a.prompt) throw new Error('--model and --prompt-ids are required');
  return a;
}

function argmax(data, offset, n) {
  let best = 0;
  for (let i = 1; i < n; ++i) if (data[offset + i] > data[offset + best]) best = i;
  return best;
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  const ort = require(process.env.GROVE_ORT_NODE || 'onnxruntime-node');
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(a.model, {
    intraOpNumThreads: a.threads, interOpNumThreads: 1,
    executionMode: 'sequential', graphOptimizationLevel: 'all',
  });
  const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
  // onnxruntime-node does not expose input shapes: the heads and head dim of the empty first
  // past come from the configuration the exporter writes beside the model (NAME.json).
  const cfg = require(a.model.replace(/\.onnx$/, '.json'));
  const heads = cfg.cache_heads || cfg.heads, dim = cfg.head_dim || cfg.hidden / cfg.heads;
  for (let i = 0; i < a.warmup; ++i) await generate(ort, session, a, heads, dim);
  const r = await generate(ort, session, a, heads, dim);
  console.log(JSON.stringify({ engine: 'ort', version: '1.20.1', threads: a.threads, load_ms: loadMs, ...r }));
}

async function generate(ort, session, a, heads, dim) {
  const pasts = session.inputNames.filter((n) => n.includes('past'));
  const presentOf = (n) => n.replace('past_key_values', 'present');
  const feeds = {};
  for (const n of pasts) feeds[n] = new ort.Tensor('float32', new Float32Array(0), [1, heads, 0, dim]);
  let ids = a.prompt, length = 0;
  const tokens = [], stepMs = [];
  let prefillMs = 0;
  for (let step = 0; step < a.newTokens; ++step) {
    const s = ids.length;
    feeds.input_ids = new ort.Tensor('int64', BigInt64Array.from(ids.map(BigInt)), [1, s]);
    if (session.inputNames.includes('attention_mask'))
      feeds.attention_mask = new ort.Tensor('int64', new BigInt64Array(length + s).fill(1n), [1, length + s]);
    if (session.inputNames.includes('position_ids'))
      feeds.position_ids = new ort.Tensor('int64', BigInt64Array.from([...Array(s).keys()].map((i) => BigInt(length + i))), [1, s]);
    const t = process.hrtime.bigint();
    const out = await session.run(feeds);
    const logits = out.logits;
    const vocab = logits.dims[logits.dims.length - 1];
    const token = argmax(logits.data, logits.data.length - vocab, vocab);
    const ms = Number(process.hrtime.bigint() - t) / 1e6;
    if (step === 0) prefillMs = ms; else stepMs.push(ms);
    for (const n of pasts) feeds[n] = out[presentOf(n)];
    length += s;
    tokens.push(token);
    ids = [token];
  }
  return { tokens, prefill_ms: prefillMs, step_ms: stepMs };
}

main().catch((e) => { console.error(e.message || e); process.exit(1); });
