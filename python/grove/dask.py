"""grove on a Dask cluster (python3-distributed): a model mapped over a Dask array or
DataFrame in partitions, one grove Engine per worker process with that worker's cores, the
model loaded once per worker and kept there for the next partitions and jobs.

    import dask.array as da, grove.dask
    x = da.from_array(images, chunks=(64, 3, 224, 224))
    y = grove.dask.map_model("resnet.onnx", x)            # a lazy Dask array of the outputs
    y.compute()                                           # on whatever Client is current

Dask moves the partitions and re-runs those of a worker that dies; grove runs each partition
as one batch. The model file must be readable at the same path on every worker.
"""
import numpy as np

from . import _grove

try:
    import dask.array as _da
    from distributed import get_worker as _get_worker
except ImportError as e:  # pragma: no cover: said once, at import
    raise ImportError("grove.dask needs Dask distributed (Debian: apt-get install python3-distributed)") from e


def _worker_state():
    """The worker's engine and sessions, kept on the Dask worker object (none outside a worker:
    a local scheduler gets a fresh state per call)."""
    try:
        worker = _get_worker()
    except ValueError:
        return {"engine": None, "sessions": {}}
    state = getattr(worker, "grove_state", None)
    if state is None:
        state = {"engine": None, "sessions": {}}
        worker.grove_state = state
        threads = getattr(worker.state, "nthreads", None) if hasattr(worker, "state") else None
        state["threads"] = int(threads or getattr(worker, "nthreads", 0) or 0)
    return state


def worker_session(model, threads=0):
    """The grove.Session of `model` in this worker process (made on first use, with an Engine
    of `threads` workers, else as many as the Dask worker has threads)."""
    state = _worker_state()
    key = (str(model), threads)
    session = state["sessions"].get(key)
    if session is None:
        if state["engine"] is None:
            state["engine"] = _grove.Engine(threads=threads or state.get("threads", 0))
        session = _grove.Session(str(model), engine=state["engine"])
        state["sessions"][key] = session
    return session


def _run_block(block, model, input_name, output_name, threads):
    session = worker_session(model, threads)
    out = session.run({input_name: np.ascontiguousarray(block)})[output_name]
    if out.ndim == 0 or out.shape[0] != block.shape[0]:
        raise _grove.Error(f"grove.dask: output '{output_name}' has shape {list(out.shape)}, not the partition's "
                           f"{block.shape[0]} rows first")
    return out


def _names(model, input_name, output_name):
    """The model's single input and its output by name (first when not given), read once in
    the calling process."""
    probe = _grove.Session(str(model), threads=1)
    inputs, outputs = probe.inputs, probe.outputs
    if input_name is None:
        if len(inputs) != 1:
            raise _grove.Error(f"grove.dask: the model has {len(inputs)} inputs; name one with input_name")
        input_name = inputs[0]["name"]
    elif input_name not in [i["name"] for i in inputs]:
        raise _grove.Error(f"grove.dask: the model has no input named '{input_name}'")
    if output_name is None:
        output_name = outputs[0]["name"]
    if output_name not in [o["name"] for o in outputs]:
        raise _grove.Error(f"grove.dask: the model has no output named '{output_name}'")
    return probe, input_name, output_name


def map_model(model, x, input_name=None, output_name=None, threads=0):
    """The model's output `output_name` (default: the first) for the Dask array `x` fed as
    `input_name` (default: the only input), partition by partition along axis 0, as a lazy
    Dask array. `x` must not be chunked along its other axes. threads: each worker's engine
    (0: the Dask worker's thread count)."""
    if any(len(c) != 1 for c in x.chunks[1:]):
        raise _grove.Error("grove.dask: the array must be chunked along axis 0 only (rechunk the other axes to one)")
    probe, input_name, output_name = _names(model, input_name, output_name)
    # The output's shape past axis 0, from one row run here (the model's declaration may
    # leave it symbolic).
    row = probe.run({input_name: np.zeros((1,) + x.shape[1:], dtype=x.dtype)})[output_name]
    return x.map_blocks(_run_block, model=str(model), input_name=input_name, output_name=output_name,
                        threads=threads, dtype=row.dtype,
                        chunks=(x.chunks[0],) + tuple((d,) for d in row.shape[1:]),
                        drop_axis=list(range(row.ndim, x.ndim)) if row.ndim < x.ndim else None,
                        new_axis=list(range(x.ndim, row.ndim)) if row.ndim > x.ndim else None,
                        meta=np.empty((0,) * row.ndim, dtype=row.dtype))


def map_dataframe(model, df, columns=None, input_name=None, output_name=None, threads=0, prefix=None):
    """The model on rows of the Dask DataFrame `df` (its `columns`, default all, as one float32
    input of [rows, len(columns)]), partition by partition: a Dask DataFrame with the
    output's columns, named PREFIX0, PREFIX1, ... (PREFIX: the output's name and '_'), indexed
    as `df`."""
    import pandas as pd

    columns = list(df.columns if columns is None else columns)
    probe, input_name, output_name = _names(model, input_name, output_name)
    row = probe.run({input_name: np.zeros((1, len(columns)), dtype=np.float32)})[output_name]
    if row.ndim != 2:
        raise _grove.Error(f"grove.dask: output '{output_name}' has {row.ndim} dimensions; a DataFrame needs 2")
    names = [f"{prefix if prefix is not None else output_name + '_'}{i}" for i in range(row.shape[1])]

    def run_partition(part):
        values = part[columns].to_numpy(dtype=np.float32)
        out = _run_block(values, str(model), input_name, output_name, threads) if len(part) else \
            np.empty((0, len(names)), dtype=row.dtype)
        return pd.DataFrame(out, index=part.index, columns=names)

    meta = pd.DataFrame({n: pd.Series(dtype=row.dtype) for n in names})
    return df.map_partitions(run_partition, meta=meta)
