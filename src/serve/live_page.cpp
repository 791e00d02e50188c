#include "serve/live_page.h"

namespace grove::serve {

// The page parses Prometheus text itself: rates and percentiles come from the difference of
// two scrapes, so they describe the last refresh interval, not the server's whole life.
std::string_view live_page_html() {
  static constexpr std::string_view kPage = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>grove serve</title>
<style>
body{font:14px system-ui,sans-serif;margin:16px;color:#222;background:#fafafa}
h1{font-size:20px;margin:0 0 4px} h2{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse} td,th{padding:3px 10px;border-bottom:1px solid #ddd;text-align:right}
td:first-child,th:first-child{text-align:left} #status{color:#777}
.bar{display:inline-block;height:10px;background:#4a7;vertical-align:middle}
canvas{background:#fff;border:1px solid #ccc}
</style></head><body>
<h1>grove serve</h1><div id="status">loading…</div>
<h2>Models</h2>
<table id="models"><thead><tr><th>model</th><th>state</th><th>req/s</th><th>p50 ms</th><th>p99 ms</th><th>failures</th><th>in flight</th></tr></thead><tbody></tbody></table>
<h2>Engine</h2><div id="engine"></div>
<h2>Tiles per core, last requests</h2>
<div id="cores"></div>
<canvas id="timeline" width="1100" height="160" data-tiles="0"></canvas>
<div id="legend"></div>
<script>
"use strict";
const REFRESH_MS = 2000;
let last = null;

// Prometheus text -> [{name, labels: {..}, value}].
function parseMetrics(text) {
  const out = [];
  for (const line of text.split("\n")) {
    if (!line || line[0] === "#") continue;
    const m = line.match(/^([a-zA-Z_:][\w:]*)(\{([^}]*)\})?\s+(\S+)/);
    if (!m) continue;
    const labels = {};
    if (m[3]) for (const kv of m[3].matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[kv[1]] = kv[2];
    out.push({name: m[1], labels, value: Number(m[4])});
  }
  return out;
}

function perModel(samples, name) {
  const by = {};
  for (const s of samples) if (s.name === name) by[s.labels.model] = s.value;
  return by;
}

// Cumulative histogram buckets per model: {model: [[le, count], ...]} sorted by le.
function buckets(samples) {
  const by = {};
  for (const s of samples) {
    if (s.name !== "grove_request_duration_seconds_bucket") continue;
    (by[s.labels.model] = by[s.labels.model] || []).push([s.labels.le === "+Inf" ? Infinity : Number(s.labels.le), s.value]);
  }
  for (const k in by) by[k].sort((a, b) => a[0] - b[0]);
  return by;
}

// The q-quantile (seconds) of the requests between two scrapes, interpolated in its bucket.
function quantile(now, before, q) {
  const d = now.map(([le, c], i) => [le, c - (before && before[i] ? before[i][1] : 0)]);
  const total = d.length ? d[d.length - 1][1] : 0;
  if (total <= 0) return null;
  const want = q * total;
  let lo = 0, below = 0;
  for (const [le, c] of d) {
    if (c >= want) {
      if (le === Infinity) return lo;
      return lo + (le - lo) * (c > below ? (want - below) / (c - below) : 0);
    }
    lo = le; below = c;
  }
  return lo;
}

const fmt = (v, digits) => v === null || v === undefined || !isFinite(v) ? "–" : v.toFixed(digits);

async function refreshModels() {
  const [index, text] = await Promise.all([
    fetch("/v2/repository/index", {method: "POST"}).then(r => r.json()),
    fetch("/metrics").then(r => r.text())]);
  const samples = parseMetrics(text);
  const now = {t: performance.now(), requests: perModel(samples, "grove_requests_total"),
               failures: perModel(samples, "grove_request_failures_total"),
               inFlight: perModel(samples, "grove_requests_in_flight"), buckets: buckets(samples),
               busy: samples.find(s => s.name === "grove_engine_busy_fraction"),
               jobs: samples.find(s => s.name === "grove_engine_jobs_in_flight")};
  const dt = last ? (now.t - last.t) / 1000 : null;
  const rows = index.map(m => {
    const n = m.name;
    const rate = dt ? ((now.requests[n] || 0) - (last.requests[n] || 0)) / dt : null;
    const b = now.buckets[n] || [], before = last ? last.buckets[n] : null;
    const p50 = quantile(b, before, 0.5), p99 = quantile(b, before, 0.99);
    return `<tr data-model="${n}"><td>${n}</td><td>${m.state}</td><td>${fmt(rate, 1)}</td>` +
           `<td>${fmt(p50 === null ? null : p50 * 1000, 2)}</td><td>${fmt(p99 === null ? null : p99 * 1000, 2)}</td>` +
           `<td>${now.failures[n] || 0}</td><td>${now.inFlight[n] || 0}</td></tr>`;
  });
  document.querySelector("#models tbody").innerHTML = rows.join("");
  document.getElementById("engine").textContent =
    `busy ${fmt(now.busy ? now.busy.value * 100 : null, 0)}% of the workers' time since start; ` +
    `${now.jobs ? now.jobs.value : 0} runs in flight`;
  last = now;
}

function color(job) {
  const hue = (job * 47) % 360;
  return `hsl(${hue},60%,55%)`;
}

async function refreshTimeline() {
  const r = await fetch("/v2/timeline");
  if (r.status === 503) return;  // another viewer is recording: keep the last one
  const t = await r.json();
  document.getElementById("cores").innerHTML = t.busy.map((b, i) =>
    `<div>worker ${i} <span class="bar" style="width:${Math.round(b * 200)}px"></span> ${fmt(b * 100, 0)}%</div>`).join("");
  const canvas = document.getElementById("timeline");
  const ctx = canvas.getContext("2d");
  const rows = Math.max(t.workers, ...t.tiles.map(x => x[0] + 1));
  const rowH = Math.floor((canvas.height - 10) / Math.max(rows, 1));
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  let start = Infinity, end = 0;
  for (const [, , s, d] of t.tiles) { start = Math.min(start, s); end = Math.max(end, s + d); }
  const span = Math.max(end - start, 1), left = 70, width = canvas.width - left - 10;
  ctx.font = "11px system-ui";
  for (let w = 0; w < rows; ++w) {
    ctx.fillStyle = "#444";
    ctx.fillText(w < t.workers ? `worker ${w}` : "caller", 4, 5 + w * rowH + rowH / 2 + 4);
  }
  const jobs = new Set();
  for (const [w, job, s, d, label] of t.tiles) {
    jobs.add(job);
    const x = left + (s - start) / span * width, wpx = Math.max(1, d / span * width);
    ctx.fillStyle = color(job);
    ctx.fillRect(x, 5 + w * rowH, wpx, rowH - 3);
    if (wpx > 60) { ctx.fillStyle = "#fff"; ctx.fillText(label.slice(0, Math.floor(wpx / 6)), x + 2, 5 + w * rowH + rowH / 2 + 4); }
  }
  canvas.dataset.tiles = String(t.tiles.length);
  document.getElementById("legend").textContent = t.tiles.length
    ? `${t.tiles.length} tiles of ${jobs.size} runs over ${fmt(span / 1000, 2)} ms (colour: run); ${t.jobs} runs in the ${fmt(t.window_us / 1000, 0)} ms window`
    : `no tiles ran in the last ${fmt(t.window_us / 1000, 0)} ms`;
}

async function refresh() {
  try {
    await refreshModels();
    await refreshTimeline();
    document.getElementById("status").textContent = `updated ${new Date().toLocaleTimeString()}, every ${REFRESH_MS / 1000} s`;
  } catch (e) {
    document.getElementById("status").textContent = `cannot reach the server: ${e.message}`;
  }
  setTimeout(refresh, REFRESH_MS);
}
refresh();
</script></body></html>
)HTML";
  return kPage;
}

}  // namespace grove::serve
