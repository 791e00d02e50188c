"""The container recipe (deploy/Containerfile) and the KServe manifests (deploy/kserve/),
checked without a container runtime: every file the recipe copies exists; its entrypoint,
with the ServingRuntime's arguments and KServe's model mount, starts this grove serve; the
probes and the metrics path the manifests name answer 200; the ports agree everywhere.
(scripts/container-build.sh builds the image where podman runs: docs/deploy.md.)"""
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
import urllib.request

import pytest

yaml = pytest.importorskip("yaml", reason="python3-yaml")

GROVE = os.environ["GROVE_BIN"]
SRC = os.environ["GROVE_SOURCE_DIR"]
DEPLOY = os.path.join(SRC, "deploy")


def containerfile():
    """(instructions as (keyword, argument text)) of deploy/Containerfile, continuations joined."""
    lines, current = [], ""
    with open(os.path.join(DEPLOY, "Containerfile")) as f:
        for raw in f:
            line = raw.rstrip("\n")
            if not current and (not line.strip() or line.lstrip().startswith("#")):
                continue
            current += line.rstrip("\\").strip() + " "
            if not line.endswith("\\"):
                keyword, _, rest = current.strip().partition(" ")
                lines.append((keyword.upper(), rest.strip()))
                current = ""
    return lines


def runtimes():
    with open(os.path.join(DEPLOY, "kserve", "servingruntime.yaml")) as f:
        return list(yaml.safe_load_all(f))


def test_every_file_the_recipe_copies_exists():
    copies = [arg.split()[0] for kw, arg in containerfile() if kw == "COPY"]
    assert copies, "no COPY in the Containerfile"
    for source in copies:
        assert os.path.exists(os.path.join(SRC, source)), source


def test_ports_agree_between_recipe_and_manifests():
    steps = containerfile()
    entry = json.loads(next(arg for kw, arg in steps if kw == "ENTRYPOINT"))
    exposed = {int(p) for kw, arg in steps if kw == "EXPOSE" for p in arg.split()}
    rest, grpc = int(entry[entry.index("--port") + 1]), int(entry[entry.index("--grpc-port") + 1])
    assert exposed == {rest, grpc}
    for rt in runtimes():
        assert rt["kind"] == "ServingRuntime" and rt["apiVersion"] == "serving.kserve.io/v1alpha1"
        c = rt["spec"]["containers"][0]
        port = c["ports"][0]["containerPort"]
        assert port == (grpc if c["ports"][0].get("name") == "h2c" else rest), rt["metadata"]["name"]
        for probe in ("livenessProbe", "readinessProbe"):
            assert c[probe]["httpGet"]["port"] == rest
    annotations = runtimes()[0]["metadata"]["annotations"]
    assert int(annotations["prometheus.kserve.io/port"]) == rest
    with open(os.path.join(DEPLOY, "kserve", "inferenceservice.yaml")) as f:
        isvc = yaml.safe_load(f)
    assert isvc["kind"] == "InferenceService"
    assert isvc["spec"]["predictor"]["model"]["runtime"] in {rt["metadata"]["name"] for rt in runtimes()}


def test_the_entrypoint_with_kserves_arguments_serves_the_model():
    steps = containerfile()
    entry = json.loads(next(arg for kw, arg in steps if kw == "ENTRYPOINT"))
    runtime = runtimes()[0]
    c = runtime["spec"]["containers"][0]
    with tempfile.TemporaryDirectory() as mnt:
        shutil.copy(os.path.join(SRC, "models", "default.onnx"), os.path.join(mnt, "model.onnx"))
        args = [a.replace("{{.Name}}", "resnet").replace("/mnt/models", mnt) for a in c["args"]]
        # The container's command as written, on free loopback ports instead of 8000/8001.
        command = list(entry)
        command[0] = GROVE
        for flag, value in (("--host", "127.0.0.1"), ("--port", "0"), ("--grpc-port", "0")):
            command[command.index(flag) + 1] = value
        proc = subprocess.Popen(command + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            port = None
            deadline = time.time() + 60
            while port is None and time.time() < deadline:
                line = proc.stdout.readline()
                if not line:
                    err = proc.stderr.read()
                    if "built without gRPC" in err:
                        pytest.skip(err.strip())
                    raise AssertionError("grove serve exited: " + shlex.join(command + args) + "\n" + err)
                if "listening on" in line:
                    port = int(line.split("127.0.0.1:")[1].split()[0])
            url = f"http://127.0.0.1:{port}"
            for probe in ("livenessProbe", "readinessProbe"):
                with urllib.request.urlopen(url + c[probe]["httpGet"]["path"], timeout=30) as r:
                    assert r.status == 200
            with urllib.request.urlopen(url + "/v2/models/resnet/ready", timeout=30) as r:
                assert r.status == 200
            with urllib.request.urlopen(url + runtime["metadata"]["annotations"]["prometheus.kserve.io/path"], timeout=30) as r:
                assert r.status == 200 and b"grove_requests_total" in r.read()
        finally:
            proc.terminate()
            assert proc.wait(timeout=60) == 0
