#include "runtime/model.h"

#include "graph/passes.h"
#include "onnx/import.h"

namespace grove {

Model::Model(Graph imported, const ShapeMap& shapes, const Limits& limits)
    : imported_(std::move(imported)), limits_(limits) {
  if (!shapes.empty()) {
    try_bind(shapes);
    return;
  }
  // Bind now when every input shape is declared statically; else wait for the first inputs.
  try {
    resolve_input_shapes(imported_, {});
  } catch (const Error&) {
    return;
  }
  try_bind({});
}

bool Model::try_bind(const ShapeMap& shapes) {
  try {
    bind(shapes);
    unbound_reason_.clear();
    return true;
  } catch (const Error& e) {
    if (e.kind() != Error::Kind::data_dependent_shape) throw;
    bound_.reset();
    unbound_reason_ = e.what();
    return false;
  }
}

Model Model::load(const std::string& path, const ShapeMap& shapes, const Limits& limits) {
  return Model(load_onnx(path, limits), shapes, limits);
}

void Model::bind(const ShapeMap& shapes) {
  Graph g = imported_;
  bind_shapes(g, shapes, limits_);
  optimize(g);
  bound_ = std::move(g);
}

const Graph& Model::graph() const {
  if (!bound_ && !unbound_reason_.empty()) throw Error(unbound_reason_);
  if (!bound_) {
    std::string dyn;
    for (const auto& in : imported_.inputs) dyn += (dyn.empty() ? "" : ", ") + in.name;
    throw Error(imported_.path + ": input shapes are not bound yet; give them with --shape (inputs: " + dyn + ")");
  }
  return *bound_;
}

TensorMap Model::run_reference(const TensorMap& inputs) {
  if (feeds_defaults(imported_, inputs)) {
    check_inputs(imported_, inputs);
    // A fed default is no constant: bind a copy of the graph where it is an input.
    Model overridden(with_fed_defaults(imported_, inputs));
    return overridden.run_reference(inputs);
  }
  ShapeMap shapes;
  for (const auto& [name, t] : inputs) shapes[name] = t.shape();
  if (!bound_ || bound_->bound_inputs != shapes) {
    // Validate names and dtypes first so a typo reads as "no input named", not a shape error.
    check_inputs(imported_, inputs);
    try_bind(shapes);
  }
  if (!bound_) return grove::run_reference(imported_, inputs, limits_);
  return grove::run_reference(*bound_, inputs, limits_);
}

}  // namespace grove
