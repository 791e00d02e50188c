"""Helpers of the load and abuse stage (abuse_test.py): the test models, a `grove serve`
process on a loopback port, and raw-socket HTTP clients that tell an answer from a reset."""
import errno
import os
import re
import select
import selectors
import signal
import socket
import subprocess
import threading
import time

import numpy as np


def write_models(folder):
    """relu: y = relu(x), x [1, 4], the normal clients' model. sum: y = sum(x), x [N, 4], the
    large requests' model (a small answer, so the clients measure the request, not the reply).
    chain: h = h @ x, 60 times, x [2048, 2048]: 1 TFLOP, seconds of tiles from a 16 MB
    request, for the 504 scenario. No constant weights: planning a new shape packs none, so the run starts at
    once (the client sends a permutation matrix)."""
    from onnx import TensorProto, helper, save

    def model(name, nodes, inputs, outputs, inits=()):
        graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
        path = os.path.join(folder, name + ".onnx")
        save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
        return path

    f = lambda name, shape: helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
    model("relu", [helper.make_node("Relu", ["x"], ["y"])], [f("x", [1, 4])], [f("y", [1, 4])])
    model("sum", [helper.make_node("ReduceSum", ["x"], ["y"], keepdims=1)], [f("x", ["N", 4])], [f("y", [1, 1])])
    links = 60
    nodes = [helper.make_node("MatMul", ["x" if i == 0 else "h%d" % i, "x"], ["h%d" % (i + 1) if i + 1 < links else "y"])
             for i in range(links)]
    model("chain", nodes, [f("x", [2048, 2048])], [f("y", [2048, 2048])])


def permutation_matrix(n):
    """An n x n permutation matrix as float32 bytes: its powers are permutations too, so the
    values neither overflow nor go subnormal (a dense MatMul costs the same on any values)."""
    return np.eye(n, dtype=np.float32)[np.random.default_rng(0).permutation(n)].tobytes()


class Server:
    """`grove serve --port 0` over the models of `folder`; the port is read from its first lines."""

    def __init__(self, grove, folder, *args):
        self.proc = subprocess.Popen([grove, "serve", "--port", "0", "--threads", "2", "--calibrate-when-idle", "0", "--model-repository", folder, *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.port = None
        deadline = time.time() + 60
        while time.time() < deadline and self.port is None:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("grove serve exited: " + self.proc.stderr.read().strip())
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
        if self.port is None:
            raise RuntimeError("grove serve did not print its port within 60 s")
        # Nobody reads the pipes from here on: a full pipe would block the server.
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()

    def alive(self):
        return self.proc.poll() is None

    def rss_mb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def metric(self, name):
        """A sample of GET /metrics without labels (or the sum over its labels)."""
        status, body = request(self.port, "GET", "/metrics")
        assert status == 200, "GET /metrics answered %s" % status
        total, found = 0.0, False
        for line in body.decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
                found = True
        assert found, "no metric " + name
        return total

    def stop(self, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=timeout)
        return self.proc.returncode


class RssWatch:
    """Samples the server's VmRSS every 20 ms on a thread, keeping the peak."""

    def __init__(self, server):
        self.server, self.peak, self._stop = server, server.rss_mb(), threading.Event()
        self.start_mb = self.peak
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.02):
            try:
                self.peak = max(self.peak, self.server.rss_mb())
            except OSError:
                return

    def done(self):
        self._stop.set()
        self._thread.join()
        return self.peak - self.start_mb


def connect(port, timeout=30):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def head(method, path, length=None, extra=()):
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: 127.0.0.1", "Connection: close"]
    if length is not None:
        lines.append("Content-Length: %d" % length)
    lines += list(extra)
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_response(s, deadline):
    """One HTTP response from `s`: (status, body). Raises ConnectionError when the connection
    ends before a whole response (an answer cut short counts as none)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += _recv(s, deadline)
    top, _, rest = data.partition(b"\r\n\r\n")
    status = int(top.split(b" ", 2)[1])
    m = re.search(rb"(?im)^content-length:\s*(\d+)", top)
    want = int(m.group(1)) if m else None
    while want is None or len(rest) < want:
        try:
            rest += _recv(s, deadline)
        except ConnectionError:
            if want is None:  # a body delimited by the close
                break
            raise
    return status, rest


def _recv(s, deadline):
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("no answer in time")
    s.settimeout(left)
    chunk = s.recv(1 << 16)
    if not chunk:
        raise ConnectionError("closed before a whole answer")
    return chunk


def exchange(port, data, timeout=30, pieces=None):
    """Sends `data` (bytes, or an iterator of bytes for `pieces`) on a fresh connection as a
    careful client does (RFC 9112 9.6: it watches for an early answer while it sends, and
    stops sending once one comes), then reads the answer. Returns the status, or one of
    'refused' (connect failed), 'reset' (the connection ended without a whole answer),
    'timeout'; and the body."""
    deadline = time.monotonic() + timeout
    try:
        s = connect(port, timeout)
    except ConnectionRefusedError:
        return "refused", b""
    except OSError as e:
        return ("timeout" if isinstance(e, socket.timeout) else "refused"), b""
    stage = b"while sending"
    try:
        with s:
            _send_watching(s, [data] if pieces is None else pieces, deadline)
            stage = b"while reading"
            return read_response(s, deadline)
    except (ConnectionError, BrokenPipeError) as e:
        return "reset", stage + b": " + str(e).encode()
    except (TimeoutError, socket.timeout):
        return "timeout", stage


def _send_watching(s, pieces, deadline):
    """Sends every piece unless the server answers first; True when it answered first. A send
    that fails (the server closed after answering) ends sending: the answer is read after."""
    s.setblocking(False)
    try:
        for piece in pieces:
            view = memoryview(piece)
            while view:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("sending took too long")
                readable, writable, _ = select.select([s], [s], [], left)
                if readable:
                    return True
                if writable:
                    try:
                        view = view[s.send(view):]
                    except BlockingIOError:
                        pass
                    except OSError as e:
                        if e.errno in (errno.EPIPE, errno.ECONNRESET):
                            return True
                        raise
        return False
    finally:
        s.setblocking(True)


def request(port, method, path, body=b"", extra=(), timeout=30):
    return exchange(port, head(method, path, len(body) if body or method != "GET" else None, extra) + body, timeout)


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] if ordered else float("nan")


def _whole_response(data):
    """(status, body) when `data` holds a whole response with a Content-Length, else None."""
    top, sep, rest = data.partition(b"\r\n\r\n")
    if not sep:
        return None
    m = re.search(rb"(?im)^content-length:\s*(\d+)", top)
    if not m or len(rest) < int(m.group(1)):
        return None
    return int(top.split(b" ", 2)[1]), rest[:int(m.group(1))]


def exchange_many(port, data, count, timeout=120):
    """`count` clients send `data` at once, each on its own connection, as exchange() does
    (stop sending at an early answer, then read it), driven by one thread over non-blocking
    sockets: with a Python thread per client, 500 threads sharing the interpreter lock could
    leave one connected and silent for seconds, which the server rightly closes as idle.
    Returns (status or 'refused'/'reset'/'timeout', body or why) per client."""
    deadline = time.monotonic() + timeout
    sel = selectors.DefaultSelector()
    results = [None] * count
    state = {}
    for i in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        err = s.connect_ex(("127.0.0.1", port))
        if err not in (0, errno.EINPROGRESS):
            results[i] = ("refused", os.strerror(err).encode())
            s.close()
            continue
        state[s] = {"i": i, "sent": 0, "got": b"", "connected": err == 0, "sending": True}
        sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE)

    def finish(s, result):
        results[state[s]["i"]] = result
        sel.unregister(s)
        s.close()
        del state[s]

    while state:
        left = deadline - time.monotonic()
        if left <= 0:
            for s in list(state):
                finish(s, ("timeout", b"no whole answer in time"))
            break
        for key, events in sel.select(min(left, 1.0)):
            s, st = key.fileobj, state.get(key.fileobj)
            if st is None:
                continue
            if not st["connected"]:
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    finish(s, ("refused", os.strerror(err).encode()))
                    continue
                st["connected"] = True
            if events & selectors.EVENT_READ:
                try:
                    chunk = s.recv(1 << 16)
                except (BlockingIOError, InterruptedError):
                    continue
                except ConnectionError as e:
                    whole = _whole_response(st["got"])
                    finish(s, whole or ("reset", b"while reading: " + str(e).encode()))
                    continue
                if st["sending"]:  # an early answer: stop sending, read it
                    st["sending"] = False
                    sel.modify(s, selectors.EVENT_READ)
                st["got"] += chunk
                whole = _whole_response(st["got"])
                if whole:
                    finish(s, whole)
                elif not chunk:
                    finish(s, ("reset", b"while reading: closed before a whole answer"))
            elif events & selectors.EVENT_WRITE and st["sending"]:
                try:
                    st["sent"] += s.send(memoryview(data)[st["sent"]:st["sent"] + (1 << 20)])
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError as e:
                    if e.errno not in (errno.EPIPE, errno.ECONNRESET):
                        raise
                    st["sending"] = False  # the server closed after answering: read the answer
                    sel.modify(s, selectors.EVENT_READ)
                    continue
                if st["sent"] == len(data):
                    st["sending"] = False
                    sel.modify(s, selectors.EVENT_READ)
    sel.close()
    return results
