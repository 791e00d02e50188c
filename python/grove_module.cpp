// `grove._grove`, the extension inside the `grove` package (python/grove/__init__.py): the
// public C++ API (include/grove) for Python, on NumPy arrays.
//
// Inputs are borrowed without a copy when they are C-contiguous and aligned for their dtype;
// the arrays stay referenced until the run is over. Outputs are handed to NumPy without a
// copy: the array keeps grove's buffer alive (unless an output is a view of an input, which is
// copied so it never outlives the caller's array). Runs release the GIL, so Python threads
// can run sessions concurrently on the one Engine.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include <grove/background_calibration.h>
#include <grove/generate.h>
#include <grove/grove.h>

namespace py = pybind11;
using grove::DType;

namespace {

py::dtype numpy_dtype(DType d) {
  switch (d) {
    case DType::f32: return py::dtype::of<float>();
    case DType::f64: return py::dtype::of<double>();
    case DType::f16: return py::dtype("float16");
    case DType::i8: return py::dtype::of<int8_t>();
    case DType::u8: return py::dtype::of<uint8_t>();
    case DType::i16: return py::dtype::of<int16_t>();
    case DType::u16: return py::dtype::of<uint16_t>();
    case DType::i32: return py::dtype::of<int32_t>();
    case DType::u32: return py::dtype::of<uint32_t>();
    case DType::i64: return py::dtype::of<int64_t>();
    case DType::u64: return py::dtype::of<uint64_t>();
    case DType::boolean: return py::dtype::of<bool>();
    default: throw grove::Error("dtype " + std::string(grove::dtype_name(d)) + " has no NumPy equivalent here");
  }
}

DType grove_dtype(const py::dtype& dt, const std::string& name) {
  for (DType d : {DType::f32, DType::f64, DType::f16, DType::i8, DType::u8, DType::i16, DType::u16, DType::i32,
                  DType::u32, DType::i64, DType::u64, DType::boolean})
    if (dt.is(numpy_dtype(d)) || dt.equal(numpy_dtype(d))) return d;
  throw grove::Error("input '" + name + "': NumPy dtype " + py::cast<std::string>(py::str(static_cast<const py::handle&>(dt))) + " is not supported");
}

// The caller's arrays, as grove Tensors over their memory, and the arrays kept referenced
// (as C-contiguous versions) for as long as the run may read them.
struct BorrowedInputs {
  grove::TensorMap tensors;
  std::vector<py::array> arrays;
};

BorrowedInputs borrow_inputs(const py::dict& feeds) {
  BorrowedInputs b;
  for (auto item : feeds) {
    std::string name = py::cast<std::string>(item.first);
    py::array array = py::array::ensure(item.second);
    if (!array) throw grove::Error("input '" + name + "' is not an array");
    DType dtype = grove_dtype(array.dtype(), name);
    py::array contiguous = py::array::ensure(array, py::array::c_style);
    grove::Shape shape(contiguous.shape(), contiguous.shape() + contiguous.ndim());
    b.tensors[name] = grove::Tensor::borrow(dtype, shape, contiguous.data());
    b.arrays.push_back(contiguous);
  }
  return b;
}

bool inside(const std::byte* p, const BorrowedInputs& in) {
  for (const auto& [name, t] : in.tensors)
    if (p >= t.raw() && p < t.raw() + std::max<size_t>(t.bytes(), 1)) return true;
  return false;
}

py::dict to_numpy(grove::TensorMap outputs, const BorrowedInputs& in) {
  py::dict result;
  for (auto& [name, t] : outputs) {
    std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
    py::dtype dt = numpy_dtype(t.dtype());
    if (t.bytes() > 0 && inside(t.raw(), in)) {
      py::array copy(dt, shape);
      std::memcpy(copy.mutable_data(), t.raw(), t.bytes());
      result[py::str(name)] = copy;
      continue;
    }
    auto* owned = new grove::Tensor(std::move(t));
    py::capsule keep(owned, [](void* p) { delete static_cast<grove::Tensor*>(p); });
    result[py::str(name)] = py::array(dt, shape, owned->raw(), keep);
  }
  return result;
}

py::list specs(const std::vector<grove::ValueSpec>& values) {
  py::list out;
  for (const grove::ValueSpec& v : values) {
    py::dict d;
    d["name"] = v.name;
    d["dtype"] = v.dtype == DType::string || v.dtype == DType::undefined ? py::object(py::str(grove::dtype_name(v.dtype)))
                                                                        : py::object(numpy_dtype(v.dtype));
    if (v.shape_known) {
      py::list shape;
      for (size_t i = 0; i < v.dims.size(); ++i) {
        if (v.dims[i] >= 0) shape.append(v.dims[i]);
        else if (!v.dim_params[i].empty()) shape.append(v.dim_params[i]);
        else shape.append(py::none());
      }
      d["shape"] = shape;
    } else {
      d["shape"] = py::none();
    }
    out.append(d);
  }
  return out;
}

// A Session and the Engine it runs on: the engine is shared with other sessions when the
// caller passed one, else owned by this session alone. Both are shared with the session's
// Futures, which may outlive the Python Session object.
struct PySession {
  std::shared_ptr<grove::Engine> engine;
  std::shared_ptr<grove::Session> session;
};

// A run in flight. It holds the input arrays until the run is over, and its session and
// engine: a Python Session dropped with runs pending stays alive, unseen, until their
// Futures go (else ~Session would wait for them holding the GIL, and the engine of a
// session that made its own could stop between a segmented run's segments). Dropping a
// Future unfinished waits for its run (the engine may still be reading the arrays).
struct PyFuture {
  std::shared_ptr<grove::Engine> engine;  // declared first: let go last
  std::shared_ptr<grove::Session> session;
  std::future<grove::TensorMap> future;
  BorrowedInputs inputs;
  std::optional<py::dict> result;

  ~PyFuture() {
    // Without the GIL: the run may need more time, and the last owner of a session or an
    // engine waits for its threads. The arrays (in `inputs`) go after, with the GIL again.
    py::gil_scoped_release release;
    if (future.valid()) future.wait();
    future = {};
    session.reset();
    engine.reset();
  }
  bool done() const {
    return result.has_value() || future.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }
  py::dict get() {
    if (!result) {
      grove::TensorMap outputs;
      {
        py::gil_scoped_release release;
        outputs = future.get();
      }
      result = to_numpy(std::move(outputs), inputs);
    }
    return *result;
  }
};

grove::Schedule schedule_of(const std::string& s) {
  if (s == "aspen") return grove::Schedule::aspen;
  if (s == "barrier") return grove::Schedule::barrier;
  throw grove::Error("schedule must be 'aspen' or 'barrier', not '" + s + "'");
}

grove::Precision precision_of(const std::string& s) {
  if (s == "fp32") return grove::Precision::fp32;
  if (s == "bf16") return grove::Precision::bf16;
  if (s == "int8w") return grove::Precision::int8_weights;
  throw grove::Error("precision must be 'fp32', 'bf16' or 'int8w', not '" + s + "'");
}

grove::TileCounts tile_counts_of(const std::string& s) {
  if (s == "tail") return grove::TileCounts::tail_aware;
  if (s == "fixed") return grove::TileCounts::fixed;
  throw grove::Error("tile_counts must be 'tail' or 'fixed', not '" + s + "'");
}

grove::ConvLayout layout_of(const std::string& s) {
  if (s == "nhwc") return grove::ConvLayout::channels_last;
  if (s == "nchw") return grove::ConvLayout::nchw;
  throw grove::Error("layout must be 'nhwc' or 'nchw', not '" + s + "'");
}

PySession make_session(const std::string& path, std::shared_ptr<grove::Engine> engine, int threads,
                       const std::map<std::string, std::vector<int64_t>>& shapes, const std::string& schedule,
                       int64_t max_memory, const std::string& precision, const std::string& prune,
                       const std::string& tile_counts, const std::string& tuning, const std::string& layout,
                       const std::string& run_alone) {
  grove::SessionOptions options;
  options.tuning = tuning;
  options.run_alone = run_alone;
  options.conv_layout = layout_of(layout);
  options.schedule = schedule_of(schedule);
  options.tile_counts = tile_counts_of(tile_counts);
  options.precision = precision_of(precision);
  options.feature_pruning = prune;
  grove::Limits limits;
  limits.max_memory = max_memory;
  grove::ShapeMap shape_map(shapes.begin(), shapes.end());
  py::gil_scoped_release release;
  if (!engine) engine = std::make_shared<grove::Engine>(grove::EngineOptions{.threads = threads});
  auto session = std::make_shared<grove::Session>(*engine, grove::Model::load(path, shape_map, limits), options);
  return PySession{std::move(engine), std::move(session)};
}

// Session.generate: grove::Generator on the session, the GIL released while it runs and taken
// again for each on_token call. An exception in on_token stops the generation and is raised.
py::object generate(PySession& s, const std::vector<int64_t>& prompt, int max_new_tokens, double temperature, int top_k,
                    double top_p, uint64_t seed, std::optional<int64_t> eos, const py::object& on_token,
                    int64_t min_capacity, bool stats) {
  grove::GenerateOptions o;
  o.max_new_tokens = max_new_tokens;
  o.sampling = {.temperature = temperature, .top_k = top_k, .top_p = top_p, .seed = seed};
  o.eos = eos;
  o.min_capacity = min_capacity;
  std::optional<py::error_already_set> raised;
  if (!on_token.is_none())
    o.on_token = [&](int64_t token) {
      py::gil_scoped_acquire gil;
      try {
        const py::object keep = on_token(token);
        return keep.is_none() || keep.cast<bool>();
      } catch (py::error_already_set& e) {
        raised.emplace(std::move(e));
        return false;
      }
    };
  grove::GenerateStats st;
  std::vector<int64_t> tokens;
  {
    py::gil_scoped_release release;
    grove::Generator generator(*s.session);
    tokens = generator.generate(prompt, o, &st);
  }
  if (raised) throw std::move(*raised);
  if (!stats) return py::cast(tokens);
  py::dict d;
  d["prefill_ms"] = st.prefill_ms;
  d["step_ms"] = st.step_ms;
  d["step_planned"] = st.step_planned;
  d["cache_capacity"] = st.cache_capacity;
  d["cache_bytes"] = st.cache_bytes;
  return py::make_tuple(tokens, d);
}

// Inputs for bench() when none are given: seeded uniform values in [-1, 1) (integers 0/1) of
// each input's declared shape.
py::dict random_inputs(const grove::Session& s) {
  std::mt19937 rng(0);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  py::dict feeds;
  for (const grove::ValueSpec& in : s.inputs()) {
    std::vector<py::ssize_t> shape;
    for (size_t i = 0; i < in.dims.size(); ++i) {
      if (in.dims[i] < 0)
        throw grove::Error("bench: input '" + in.name + "' has a dynamic dimension; pass inputs=");
      shape.push_back(in.dims[i]);
    }
    py::array a(numpy_dtype(in.dtype), shape);
    py::buffer_info info = a.request(true);
    if (in.dtype == DType::f32) {
      auto* p = static_cast<float*>(info.ptr);
      for (py::ssize_t i = 0; i < info.size; ++i) p[i] = uniform(rng);
    } else {
      std::memset(info.ptr, 0, static_cast<size_t>(info.size * info.itemsize));
    }
    feeds[py::str(in.name)] = a;
  }
  return feeds;
}

struct PyDynamicSession {
  std::shared_ptr<grove::Engine> engine;  // kept alive as long as the session
  std::unique_ptr<grove::DynamicSession> session;
};

PyDynamicSession make_dynamic_session(const std::string& path, std::shared_ptr<grove::Engine> engine, int threads,
                                      std::vector<double> ratios, const std::string& schedule,
                                      const std::string& precision) {
  grove::SessionOptions options;
  options.schedule = schedule_of(schedule);
  options.precision = precision_of(precision);
  py::gil_scoped_release release;
  if (!engine) engine = std::make_shared<grove::Engine>(grove::EngineOptions{.threads = threads});
  auto session = std::make_unique<grove::DynamicSession>(*engine, path, options, std::move(ratios));
  return PyDynamicSession{std::move(engine), std::move(session)};
}

int subnet_index(const PyDynamicSession& s, const py::object& subnet) {
  if (py::isinstance<py::int_>(subnet)) return subnet.cast<int>();
  const std::string name = py::str(subnet);
  const int i = s.session->find(name);
  if (i < 0) throw grove::Error("no sub-net named '" + name + "'");
  return i;
}

// Session.check: grove/check.h's report as a dict.
py::dict check(PySession& s, py::object inputs, double tolerance) {
  py::dict feeds = inputs.is_none() ? random_inputs(*s.session) : py::dict(inputs);
  BorrowedInputs in = borrow_inputs(feeds);
  grove::CheckReport r;
  {
    py::gil_scoped_release release;
    r = grove::check_session(*s.session, in.tensors, tolerance);
  }
  py::list outputs;
  for (const grove::OutputCheck& o : r.outputs) {
    py::dict d;
    d["name"] = o.name, d["error"] = o.error, d["largest"] = o.largest, d["agrees"] = o.agrees;
    d["shape_differs"] = o.shape_differs;
    outputs.append(d);
  }
  py::dict report;
  report["agrees"] = r.agrees;
  report["outputs"] = outputs;
  if (!r.agrees) {
    py::dict first;
    first["value"] = r.value, first["error"] = r.value_error, first["largest"] = r.value_largest;
    first["node"] = r.node, first["op"] = r.op, first["domain"] = r.domain;
    first["input_shapes"] = r.input_shapes, first["planned_by"] = r.planned_by;
    first["values_searched"] = r.values_searched, first["probes"] = r.probes;
    report["first_difference"] = first;
  }
  return report;
}

// Text from a model file as str, whatever its bytes: invalid UTF-8 becomes U+FFFD.
py::str text(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

py::dict metadata(const grove::ModelMetadata& m) {
  py::dict d, custom;
  d["producer_name"] = text(m.producer_name);
  d["producer_version"] = text(m.producer_version);
  d["graph_name"] = text(m.graph_name);
  d["domain"] = text(m.domain);
  d["description"] = text(m.description);
  d["graph_description"] = text(m.graph_description);
  d["version"] = m.version;
  for (const auto& [k, v] : m.custom) custom[text(k)] = text(v);
  d["custom"] = custom;
  return d;
}

py::dict bench(PySession& s, py::object inputs, int runs, int warmup) {
  if (runs < 1) throw grove::Error("bench: runs must be at least 1");
  py::dict feeds = inputs.is_none() ? random_inputs(*s.session) : py::dict(inputs);
  BorrowedInputs in = borrow_inputs(feeds);
  std::vector<double> ms;
  {
    py::gil_scoped_release release;
    for (int i = 0; i < warmup; ++i) s.session->run(in.tensors);
    for (int i = 0; i < runs; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      s.session->run(in.tensors);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  auto pct = [&](double q) { return sorted[std::min(sorted.size() - 1, static_cast<size_t>(q * (sorted.size() - 1) + 0.5))]; };
  py::dict r;
  r["runs"] = runs;
  r["p50_ms"] = pct(0.5);
  r["p90_ms"] = pct(0.9);
  r["min_ms"] = sorted.front();
  r["max_ms"] = sorted.back();
  r["times_ms"] = ms;
  return r;
}

}  // namespace

// A BackgroundCalibration and the engine it watches, kept alive as long as it runs (declared
// first: let go last).
struct PyCalibration {
  std::shared_ptr<grove::Engine> engine;
  std::unique_ptr<grove::BackgroundCalibration> calibration;
  ~PyCalibration() {
    py::gil_scoped_release release;  // its thread may be inside a run: never hold the GIL over the join
    calibration.reset();
  }
};

PYBIND11_MODULE(_grove, m) {
  m.doc() = "grove: ONNX models on CPUs, every operator cut into tiles run by one barrier-free dataflow runtime.";
  py::register_exception<grove::Error>(m, "Error", PyExc_RuntimeError);
  m.attr("__version__") = GROVE_VERSION;

  py::class_<grove::Engine, std::shared_ptr<grove::Engine>>(m, "Engine",
      "The workers (one per core) shared by every Session given this engine: runs of several models co-execute in one ready pool.")
      .def(py::init([](int threads, int max_threads) {
             py::gil_scoped_release release;
             return std::make_shared<grove::Engine>(grove::EngineOptions{.threads = threads, .max_threads = max_threads});
           }),
           py::arg("threads") = 0, py::arg("max_threads") = 0,
           "threads=0: the cores this process may use. max_threads: workers started, the most set_workers() can "
           "activate (0: threads)")
      .def_property_readonly("threads", &grove::Engine::threads, "Workers taking tiles now")
      .def_property_readonly("max_threads", &grove::Engine::max_threads)
      .def("set_workers", [](grove::Engine& e, int n) { return e.set_workers(n); }, py::arg("n"),
           "Elastic resize while runs are in flight: workers 0..n-1 take tiles from now on (clamped to "
           "1..max_threads; returns the count). docs/scaling.md")
      .def("start_trace", [](grove::Engine& e) { e.start_trace(); },
           "Records every tile run from now on (which worker, when), for stop_trace_json()")
      .def("stop_trace_json",
           [](grove::Engine& e) {
             std::string json;
             {
               py::gil_scoped_release release;
               json = e.stop_trace_json();
             }
             return json;
           },
           "Stops recording; the tiles since start_trace() as Chrome/Perfetto trace JSON (one track per worker)");

  py::class_<PyCalibration>(m, "BackgroundCalibration",
      "Calibrates the performance model shipped for this ISA to this machine while an Engine is idle "
      "(docs/tuning.md); grove.Engine starts one itself.")
      .def(py::init([](std::shared_ptr<grove::Engine> engine, double idle_seconds) {
             auto c = std::make_unique<PyCalibration>();
             c->engine = std::move(engine);
             c->calibration = std::make_unique<grove::BackgroundCalibration>(
                 *c->engine, grove::BackgroundCalibrationOptions{.idle_seconds = idle_seconds});
             return c;
           }),
           py::arg("engine"), py::arg("idle_seconds") = 10.0)
      .def("status",
           [](const PyCalibration& c) {
             const grove::BackgroundCalibrationStatus s = c.calibration->status();
             py::dict d;
             d["state"] = s.state;
             d["detail"] = s.detail;
             d["model_path"] = s.model_path;
             d["layers_measured"] = s.layers_measured;
             d["layers_total"] = s.layers_total;
             d["interruptions"] = s.interruptions;
             return d;
           },
           "{state, detail, model_path, layers_measured, layers_total, interruptions}; state: waiting, measuring, fitting, done, "
           "not needed, stopped or failed")
      .def("stop", [](PyCalibration& c) {
             py::gil_scoped_release release;
             c.calibration.reset();
           },
           "Stops it now (a calibration not finished installs nothing)");

  py::class_<PyFuture>(m, "Future", "A run in flight, from Session.submit().")
      .def("result", &PyFuture::get, "Waits for the run; returns {output name: ndarray} or raises grove.Error.")
      .def("done", &PyFuture::done);

  py::class_<PyDynamicSession>(m, "DynamicSession",
      "A dynamic model: several sub-nets with shared weights, all planned at load; each run picks one "
      "(docs/dynamic.md).")
      .def(py::init(&make_dynamic_session), py::arg("path"), py::arg("engine") = nullptr, py::arg("threads") = 0,
           py::arg("ratios") = std::vector<double>{}, py::arg("schedule") = "aspen", py::arg("precision") = "fp32",
           "Loads PATH, whose metadata key grove.subnets lists its sub-nets; or, with ratios, slices any model "
           "uniformly at those width ratios (untrained narrower nets: for latency studies).")
      .def_property_readonly("subnets",
           [](const PyDynamicSession& s) {
             py::list out;
             for (const auto& i : s.session->subnets()) {
               py::dict d;
               d["name"] = i.name;
               d["width"] = i.ratio;
               d["accuracy"] = i.accuracy;
               d["flops"] = i.flops;
               d["parameters"] = i.parameters;
               out.append(d);
             }
             return out;
           },
           "Cheapest first: [{name, width, accuracy, flops, parameters}]")
      .def("run",
           [](PyDynamicSession& s, const py::dict& feeds, const py::object& subnet) {
             const int index = subnet_index(s, subnet);
             BorrowedInputs in = borrow_inputs(feeds);
             grove::TensorMap outputs;
             {
               py::gil_scoped_release release;
               outputs = s.session->run(in.tensors, index);
             }
             return to_numpy(std::move(outputs), in);
           },
           py::arg("inputs"), py::arg("subnet"), "Runs one sub-net, by index into subnets or by name (or width).")
      .def("run_within",
           [](PyDynamicSession& s, const py::dict& feeds, double target_ms) {
             BorrowedInputs in = borrow_inputs(feeds);
             grove::TensorMap outputs;
             grove::SubnetChoice choice;
             {
               py::gil_scoped_release release;
               outputs = s.session->run_within(in.tensors, target_ms, &choice);
             }
             return py::make_tuple(to_numpy(std::move(outputs), in), s.session->subnets()[static_cast<size_t>(choice.subnet)].name);
           },
           py::arg("inputs"), py::arg("target_ms"),
           "Runs the most accurate sub-net predicted to meet target_ms under the engine's current load; "
           "returns (outputs, the sub-net's name).");

  py::class_<PySession>(m, "Session", "One ONNX model, planned once per input shape, run on an Engine.")
      .def(py::init(&make_session), py::arg("path"), py::arg("engine") = nullptr, py::arg("threads") = 0,
           py::arg("shapes") = std::map<std::string, std::vector<int64_t>>{}, py::arg("schedule") = "aspen",
           py::arg("max_memory") = 0, py::arg("precision") = "fp32", py::arg("prune") = "", py::arg("tile_counts") = "tail",
           py::arg("tuning") = "auto", py::arg("layout") = "nhwc", py::arg("run_alone") = "auto",
           "Loads PATH. engine: share an Engine with other sessions (else one of `threads` workers is made). "
           "shapes: {input: [dims]} for dynamic inputs. schedule: 'aspen' (barrier-free) or 'barrier'. "
           "max_memory: bytes a model may declare (0: half the RAM). precision: 'fp32', 'bf16' for "
           "Conv/MatMul/Gemm products in bfloat16 on CPUs with AVX512-BF16 (fp32 elsewhere; docs/precision.md), or "
           "'int8w' for MatMul/Gemm weights as int8 with a scale per column (weight-only; docs/generation.md). "
           "prune: dynamic feature-map pruning, '' as the model's grove.antidote metadata says, 'off', or "
           "statements 'prune VALUE channels=R positions=R [block=B]' one per line (docs/dynamic.md). tile_counts: 'tail' "
           "(coarser tiles where a finer cut repeats work) or 'fixed' (one per thread; docs/scaling.md). tuning: "
           "'auto' plans with the tuning record grove tune wrote for this model and CPU, else with a performance "
           "model's choices tried against the rules' plan before the first run (the verdict kept as a record), 'off' by the hand rules, 'model', 'record', or a record file (docs/tuning.md). layout: 'nhwc' "
           "runs chains of float convs channels-last where the rule takes them, 'nchw' every conv as written "
           "(docs/layout.md). run_alone: 'auto' runs a tiny plan on the calling thread alone where its first runs "
           "measure that faster than sharing it across the engine's workers, 'on' always, 'off' never "
           "(docs/runtime.md).")
      .def("run",
           [](PySession& s, const py::dict& feeds) {
             BorrowedInputs in = borrow_inputs(feeds);
             grove::TensorMap outputs;
             {
               py::gil_scoped_release release;
               outputs = s.session->run(in.tensors);
             }
             return to_numpy(std::move(outputs), in);
           },
           py::arg("inputs"), "Runs one inference: {input name: ndarray} -> {output name: ndarray}.")
      .def("submit",
           [](PySession& s, const py::dict& feeds) {
             auto f = std::make_unique<PyFuture>();
             f->engine = s.engine;
             f->session = s.session;
             f->inputs = borrow_inputs(feeds);
             py::gil_scoped_release release;
             f->future = s.session->submit(f->inputs.tensors);
             return f;
           },
           py::arg("inputs"), "Starts one inference and returns a Future; runs in flight co-execute.")
      .def("run_reference",
           [](PySession& s, const py::dict& feeds) {
             BorrowedInputs in = borrow_inputs(feeds);
             grove::TensorMap outputs;
             {
               py::gil_scoped_release release;
               grove::Model copy = s.session->model();  // the oracle binds its own copy
               outputs = copy.run_reference(in.tensors);
             }
             return to_numpy(std::move(outputs), in);
           },
           py::arg("inputs"), "The naive single-threaded reference executor (the test oracle), for comparison.")
      .def("check", &check, py::arg("inputs") = py::none(), py::arg("tolerance") = 1e-4,
           "Runs the session's plan and the reference executor on the model as imported (seeded random inputs "
           "when inputs is None) and returns {'agrees', 'outputs': [{'name', 'error', 'largest', 'agrees'}], "
           "'first_difference': {'value', 'node', 'op', 'input_shapes', 'planned_by', ...} on a mismatch}; "
           "error is a fraction of each output's largest magnitude (docs/correctness.md).")
      .def("generate", &generate, py::arg("prompt"), py::arg("max_new_tokens") = 16, py::arg("temperature") = 0.0,
           py::arg("top_k") = 0, py::arg("top_p") = 1.0, py::arg("seed") = 0, py::arg("eos") = py::none(),
           py::arg("on_token") = py::none(), py::arg("min_capacity") = 64, py::arg("stats") = false,
           "Generates tokens with a decoder that takes its key/value cache as inputs (past_key_values.N.key, ...) "
           "and returns it grown (present.N.key, ...): the prompt's token ids in one step, then one token per step "
           "with the cache bound in place. Greedy unless temperature > 0 (then top_k / top_p sampling with `seed`). "
           "Stops after max_new_tokens, at `eos`, or when on_token(token) returns False. Returns the new tokens; "
           "with stats=True, (tokens, {'prefill_ms', 'step_ms', 'step_planned', 'cache_capacity', 'cache_bytes'}). "
           "docs/generation.md.")
      .def("bench", &bench, py::arg("inputs") = py::none(), py::arg("runs") = 20, py::arg("warmup") = 3,
           "Times `runs` warm runs (seeded random inputs of the declared shapes when inputs is None).")
      .def_property_readonly("inputs", [](const PySession& s) { return specs(s.session->inputs()); })
      .def_property_readonly("outputs", [](const PySession& s) { return specs(s.session->outputs()); })
      .def_property_readonly("path", [](const PySession& s) { return s.session->model().path(); })
      .def_property_readonly("metadata", [](const PySession& s) { return metadata(s.session->model().metadata()); },
                             "{'producer_name', 'producer_version', 'graph_name', 'domain', 'description', "
                             "'graph_description', 'version', 'custom': {metadata_props}} as the file says")
      .def_property_readonly("engine", [](const PySession& s) { return s.engine; });
}
