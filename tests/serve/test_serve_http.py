"""`grove serve` over real HTTP on a loopback port, driven as a user would: curl-like requests
to every endpoint, error cases, 1,000 concurrent requests of two models checked against
`grove run`, `grove load`, and a graceful SIGTERM with requests in flight."""
import concurrent.futures
import json
import os
import signal
import struct
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

GROVE = os.environ["GROVE_BIN"]
SRC = os.environ["GROVE_SOURCE_DIR"]
CNN = os.path.join(SRC, "models", "default.onnx")
X = np.load(os.path.join(SRC, "models", "default_input.npy"))


def tiny_model(path):
    """y = relu(x) on x [N, 4], made with the onnx package."""
    from onnx import TensorProto, helper, save

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "tiny", [x], [y])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


class Server:
    def __init__(self, *args, calibrate_when_idle="0", env=None):
        self.proc = subprocess.Popen([GROVE, "serve", "--port", "0", "--threads", "2", "--calibrate-when-idle",
                                      calibrate_when_idle, *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.port = None
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("grove serve exited: " + self.proc.stderr.read())
            if "listening on" in line:
                self.port = int(line.split("http://127.0.0.1:")[1].split()[0])
                break
        assert self.port, "grove serve did not start"
        self.url = "http://127.0.0.1:%d" % self.port

    def request(self, method, path, body=None, headers=None):
        data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=60)
        return self.proc.returncode


@pytest.fixture(scope="module")
def server():
    with tempfile.TemporaryDirectory() as d:
        tiny_model(os.path.join(d, "tiny.onnx"))
        s = Server("--model", "cnn=" + CNN, "--model-repository", d)
        yield s
        assert s.stop() == 0


def cnn_request(binary=False):
    if not binary:
        return {"inputs": [{"name": "image", "shape": list(X.shape), "datatype": "FP32", "data": X.ravel().tolist()}]}, {}
    head = json.dumps({"inputs": [{"name": "image", "shape": list(X.shape), "datatype": "FP32",
                                   "parameters": {"binary_data_size": X.nbytes}}],
                       "parameters": {"binary_data_output": True}}).encode()
    return head + X.astype(np.float32).tobytes(), {"Inference-Header-Content-Length": str(len(head))}


def logits_of(status, headers, body):
    assert status == 200, body
    n = headers.get("Inference-Header-Content-Length")
    if n is None:
        out = json.loads(body)["outputs"][0]
        return np.array(out["data"], dtype=np.float32).reshape(out["shape"])
    meta = json.loads(body[:int(n)])["outputs"][0]
    return np.frombuffer(body[int(n):], dtype=np.float32).reshape(meta["shape"])


def test_endpoints(server):
    assert server.request("GET", "/v2/health/live")[0] == 200
    assert server.request("GET", "/v2/health/ready")[0] == 200
    status, _, body = server.request("GET", "/v2")
    assert status == 200 and json.loads(body)["name"] == "grove"
    status, _, body = server.request("GET", "/v2/models/cnn")
    meta = json.loads(body)
    assert meta["inputs"][0]["name"] == "image" and meta["inputs"][0]["shape"] == list(X.shape)
    assert server.request("GET", "/v2/models/tiny/ready")[0] == 200
    status, _, body = server.request("POST", "/v2/models/tiny/infer",
                                     {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [-1, 2, -3, 4]}]})
    assert status == 200 and json.loads(body)["outputs"][0]["data"] == [0, 2, 0, 4]
    status, _, body = server.request("POST", "/v2/repository/index", b"")
    assert {e["name"]: e["state"] for e in json.loads(body)} == {"cnn": "READY", "tiny": "READY"}
    status, headers, body = server.request("GET", "/metrics")
    assert status == 200 and b'grove_requests_total{model="tiny"} 1' in body


def test_metrics_pass_promtool(server):
    """Prometheus's own checker (Debian's `prometheus`) on /metrics after requests of both
    models, a failure among them, so every family has samples."""
    import shutil
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("no promtool (Debian's prometheus package; scripts/install-deps.sh installs it)")
    server.request("POST", "/v2/models/tiny/infer",
                   {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]})
    server.request("POST", "/v2/models/tiny/infer", b"{not json")
    server.request("POST", "/v2/models/cnn/infer",
                   {"inputs": [{"name": "image", "shape": list(X.shape), "datatype": "FP32", "data": X.ravel().tolist()}]})
    status, _, body = server.request("GET", "/metrics")
    assert status == 200
    res = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, timeout=60)
    assert res.returncode == 0, (res.stdout + res.stderr).decode()[-3000:]


def test_live_page_in_headless_chromium(server, tmp_path):
    """GET / in Debian's headless Chromium while both models get requests: the page loads with
    no console message (it logs nothing when all is well), lists the served models, and its
    timeline draws tiles."""
    import re
    import shutil
    chromium = shutil.which("chromium")
    if not chromium:
        pytest.skip("no chromium (scripts/install-deps.sh installs Debian's)")
    image = {"inputs": [{"name": "image", "shape": list(X.shape), "datatype": "FP32", "data": X.ravel().tolist()}]}
    stop = threading.Event()

    def traffic():
        while not stop.is_set():
            server.request("POST", "/v2/models/cnn/infer", image)
            server.request("POST", "/v2/models/tiny/infer",
                           {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]})

    clients = [threading.Thread(target=traffic) for _ in range(2)]
    for c in clients:
        c.start()
    try:
        res = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                              "--virtual-time-budget=5000", "--enable-logging=stderr", "--v=0",
                              "--user-data-dir=" + str(tmp_path / "profile"), "--dump-dom", server.url + "/"],
                             capture_output=True, text=True, timeout=120)
    finally:
        stop.set()
        for c in clients:
            c.join()
    assert res.returncode == 0, res.stderr[-2000:]
    console = [line for line in res.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, console
    dom = res.stdout
    assert '<tr data-model="cnn">' in dom and '<tr data-model="tiny">' in dom, dom[-2000:]
    tiles = re.search(r'data-tiles="(\d+)"', dom)
    assert tiles and int(tiles.group(1)) > 0, dom[-2000:]
    assert 'id="status">updated' in dom


def test_timeline_endpoint(server):
    status, headers, body = server.request("GET", "/v2/timeline")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    t = json.loads(body)
    assert t["workers"] == 2 and len(t["busy"]) == 2 and all(0 <= b <= 1 for b in t["busy"])
    assert server.request("POST", "/v2/timeline")[0] == 405


@pytest.mark.parametrize("path,body,code,words", [
    ("/v2/models/nope/infer", {"inputs": []}, 404, "unknown model"),
    ("/v2/models/tiny/infer", b"{not json", 400, "malformed JSON"),
    ("/v2/models/tiny/infer", {"inputs": [{"name": "q", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}, 400, "no input named 'q'"),
    ("/v2/models/tiny/infer", {"inputs": [{"name": "x", "shape": [1, 4], "datatype": "FP64", "data": [1, 2, 3, 4]}]}, 400, "datatype FP64"),
    ("/v2/models/tiny/infer", {"inputs": [{"name": "x", "shape": [1, 5], "datatype": "FP32", "data": [1, 2, 3, 4, 5]}]}, 400, "expects ?x4"),
    ("/v2/models/tiny/infer", b"x" * (65 << 20), 413, "--max-body-bytes"),
], ids=["unknown-model", "bad-json", "bad-name", "bad-datatype", "bad-shape", "too-large"])
def test_errors_are_json(server, path, body, code, words):
    status, _, raw = server.request("POST", path, body)
    assert status == code, raw[:300]
    assert words in json.loads(raw)["error"]


def test_thousand_concurrent_requests_equal_grove_run(server, grove_run_logits):
    """1,000 requests from 32 clients, both models, JSON and binary: no errors, and every CNN
    answer equal to grove run's output."""
    tiny = {"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32", "data": [-1, 2, -3, 4, 5, -6, 7, -8]}]}
    cnn_json, cnn_bin = cnn_request(False), cnn_request(True)

    def one(i):
        if i % 4 == 3:
            status, _, body = server.request("POST", "/v2/models/tiny/infer", tiny)
            assert status == 200, body
            return ("tiny", json.loads(body)["outputs"][0]["data"])
        body, headers = cnn_bin if i % 2 else cnn_json
        return ("cnn", logits_of(*server.request("POST", "/v2/models/cnn/infer", body, headers)))

    with concurrent.futures.ThreadPoolExecutor(max_workers=32) as pool:
        results = list(pool.map(one, range(1000)))
    assert len(results) == 1000
    for kind, value in results:
        if kind == "tiny":
            assert value == [0, 2, 0, 4, 5, 0, 7, 0]
        else:
            np.testing.assert_allclose(value, grove_run_logits, rtol=1e-5, atol=1e-6)


def test_load_generator(server):
    for extra in ([], ["--binary"]):
        r = subprocess.run([GROVE, "load", server.url, "--model", "cnn", "-c", "8", "-n", "200", "--json", *extra],
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        report = json.loads(r.stdout)
        assert report["ok"] == 200 and report["errors"] == 0 and report["mismatches"] == 0
        assert 0 < report["p50_ms"] <= report["p99_ms"]


def test_sigterm_finishes_requests_in_flight():
    s = Server("--model", "cnn=" + CNN)
    body, headers = cnn_request(True)
    statuses = []

    def client():
        for _ in range(30):
            try:
                statuses.append(s.request("POST", "/v2/models/cnn/infer", body, headers)[0])
            except (urllib.error.URLError, ConnectionError):
                statuses.append("refused")  # after the listener closed: never half an answer

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    assert s.stop() == 0
    for t in threads:
        t.join()
    assert statuses.count(200) > 0
    assert all(code in (200, 503, "refused") for code in statuses), statuses


def test_background_calibration_measures_on_idle_cores_and_stops_with_the_server(tmp_path):
    """On a machine without a performance model of its own, an idle server calibrates the
    shipped one (docs/tuning.md); /metrics shows it, and SIGTERM stops it at once, installing
    nothing unfinished."""
    s = Server("--model", "cnn=" + CNN, calibrate_when_idle="0.2", env=dict(os.environ, GROVE_TUNE_DIR=str(tmp_path)))
    try:
        deadline, metrics = time.time() + 120, ""
        while time.time() < deadline:
            metrics = s.request("GET", "/metrics")[2].decode()
            if 'grove_calibration_state{state="not needed"} 1' in metrics:
                pytest.skip("no performance model ships for this ISA")
            measured = [line for line in metrics.splitlines() if line.startswith("grove_calibration_layers_measured ")]
            if measured and float(measured[0].split()[1]) >= 1:
                break
            time.sleep(0.05)
        assert 'grove_calibration_layers_total 50' in metrics or "grove_calibration_layers_total 25" in metrics, metrics
        assert float(measured[0].split()[1]) >= 1, metrics
    finally:
        started = time.time()
        assert s.stop() == 0
    assert time.time() - started < 30
    assert list(tmp_path.rglob("conv.perfmodel")) == []


def test_bad_command_lines():
    r = subprocess.run([GROVE, "serve"], capture_output=True, text=True)
    assert r.returncode == 1 and "--model" in r.stderr
    r = subprocess.run([GROVE, "serve", "--model", "x=/nonexistent.onnx", "--port", "0"], capture_output=True, text=True)
    assert r.returncode == 1 and "nonexistent.onnx" in r.stderr and "\n" not in r.stderr.strip()
    r = subprocess.run([GROVE, "load", "http://127.0.0.1:9", "--model", "x"], capture_output=True, text=True)
    assert r.returncode == 1 and "cannot reach" in r.stderr
