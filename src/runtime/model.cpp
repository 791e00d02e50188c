#include "runtime/model.h"

#include <optional>

#include "passes/passes.h"
#include "onnx/import.h"

namespace grove {

struct Model::Impl {
  Graph imported;
  Limits limits;
  std::optional<Graph> bound;
  std::string unbound_reason;
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Model ModelInternals::from_graph(Graph imported, const ShapeMap& shapes, const Limits& limits) {
  Model model(std::make_unique<Model::Impl>(Model::Impl{std::move(imported), limits, std::nullopt, {}}));
  if (!shapes.empty()) {
    model.try_bind(shapes);
    return model;
  }
  // Bind now when every input shape is declared statically; else wait for the first inputs.
  try {
    resolve_input_shapes(model.impl_->imported, {});
  } catch (const Error&) {
    return model;
  }
  model.try_bind({});
  return model;
}

Model::Model(const Model& other) : impl_(std::make_unique<Impl>(*other.impl_)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(const Model& other) {
  if (this != &other) impl_ = std::make_unique<Impl>(*other.impl_);
  return *this;
}
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

const std::string& Model::path() const { return impl_->imported.path; }
bool Model::is_bound() const { return impl_->bound.has_value(); }
const std::string& Model::unbound_reason() const { return impl_->unbound_reason; }
const Limits& Model::limits() const { return impl_->limits; }
const Graph& ModelInternals::imported(const Model& model) { return model.impl_->imported; }

namespace {

ValueSpec spec_of(const ValueDecl& d) {
  ValueSpec s{d.name, d.dtype, {}, {}, d.has_shape, d.kind};
  for (const Dim& dim : d.dims) {
    s.dims.push_back(dim.value);
    s.dim_params.push_back(dim.param);
  }
  return s;
}

}  // namespace

std::vector<ValueSpec> Model::inputs() const {
  std::vector<ValueSpec> out;
  for (const ValueDecl& d : impl_->imported.inputs) out.push_back(spec_of(d));
  return out;
}

ModelMetadata Model::metadata() const {
  const Graph& g = impl_->imported;
  return {.producer_name = g.producer_name, .producer_version = g.producer_version, .graph_name = g.name,
          .domain = g.domain, .description = g.description, .graph_description = g.graph_description,
          .version = g.model_version, .custom = g.metadata};
}

std::vector<ValueSpec> Model::outputs() const {
  std::vector<ValueSpec> out;
  for (const ValueDecl& d : impl_->imported.outputs) out.push_back(spec_of(d));
  return out;
}

bool Model::try_bind(const ShapeMap& shapes) {
  try {
    bind(shapes);
    impl_->unbound_reason.clear();
    return true;
  } catch (const Error& e) {
    if (e.kind() != Error::Kind::data_dependent_shape) throw;
    impl_->bound.reset();
    impl_->unbound_reason = e.what();
    return false;
  }
}

Model Model::load(const std::string& path, const ShapeMap& shapes, const Limits& limits) {
  return ModelInternals::from_graph(load_onnx(path, limits), shapes, limits);
}

namespace {

// `imported` bound to `shapes` and optimised: what Model::bind keeps.
Graph bound_and_optimised(const Graph& imported, const ShapeMap& shapes, const Limits& limits) {
  Graph g = imported;
  bind_shapes(g, shapes, limits);
  optimize(g);
  return g;
}

}  // namespace

void Model::bind(const ShapeMap& shapes) { impl_->bound = bound_and_optimised(impl_->imported, shapes, impl_->limits); }

std::optional<Graph> ModelInternals::bound_copy(const Model& model, const ShapeMap& shapes) {
  try {
    return bound_and_optimised(model.impl_->imported, shapes, model.impl_->limits);
  } catch (const Error& e) {
    if (e.kind() != Error::Kind::data_dependent_shape) throw;
    return std::nullopt;
  }
}

const Graph& ModelInternals::bound(const Model& model) {
  const Model::Impl& m = *model.impl_;
  if (!m.bound && !m.unbound_reason.empty()) throw Error(m.unbound_reason);
  if (!m.bound) {
    std::string dyn;
    for (const auto& in : m.imported.inputs) dyn += (dyn.empty() ? "" : ", ") + in.name;
    throw Error(m.imported.path + ": input shapes are not bound yet; give them with --shape (inputs: " + dyn + ")");
  }
  return *m.bound;
}

TensorMap Model::run_reference(const TensorMap& inputs, const CancelToken& cancel) {
  return ModelInternals::run_reference(*this, inputs, cancel, nullptr);
}

ValueMap Model::run_reference_values(const ValueMap& inputs, const CancelToken& cancel) {
  return ModelInternals::run_reference_values(*this, inputs, cancel, nullptr);
}

TensorMap ModelInternals::run_reference(Model& model, const TensorMap& inputs, const CancelToken& cancel,
                                        int64_t* peak_bytes) {
  Model::Impl& m = *model.impl_;
  if (feeds_defaults(m.imported, inputs)) {
    check_inputs(m.imported, inputs);
    // A fed default is no constant: bind a copy of the graph where it is an input.
    Model overridden = model_from_graph(with_fed_defaults(m.imported, inputs));
    return run_reference(overridden, inputs, cancel, peak_bytes);
  }
  ShapeMap shapes;
  for (const auto& [name, t] : inputs) shapes[name] = t.shape();
  if (!m.bound || m.bound->bound_inputs != shapes) {
    // Validate names and dtypes first so a typo reads as "no input named", not a shape error.
    check_inputs(m.imported, inputs);
    model.try_bind(shapes);
  }
  return grove::run_reference(m.bound ? *m.bound : m.imported, inputs, m.limits, cancel, peak_bytes);
}

ValueMap ModelInternals::run_reference_values(Model& model, const ValueMap& inputs, const CancelToken& cancel,
                                              int64_t* peak_bytes) {
  Model::Impl& m = *model.impl_;
  check_inputs(m.imported, inputs);
  if (has_only_tensor_io(m.imported))
    return to_values(run_reference(model, to_tensors(inputs, m.imported.path + ": input "), cancel, peak_bytes));
  // Sequences and optionals never bind: the imported graph runs as it is.
  return grove::run_reference_values(m.imported, inputs, m.limits, nullptr, cancel, peak_bytes);
}

}  // namespace grove
