#pragma once
// Model is public (include/grove/model.h) and names nothing of the library's insides. The
// library, its tools and tests also build models over graphs they imported themselves and
// look at the graphs inside; that access lives here, where users cannot include it.
#include <optional>

#include "passes/bind.h"
#include "grove/model.h"
#include "runtime/reference_executor.h"

namespace grove {

// Model's friend: the only way past its public surface. The free functions below are the
// spelling the library uses.
struct ModelInternals {
  static Model from_graph(Graph imported, const ShapeMap& shapes, const Limits& limits);
  static const Graph& imported(const Model& model);
  static const Graph& bound(const Model& model);
  // The graph bound to `shapes` and optimised, as Model::bind makes it, leaving the model as it
  // is (so it may run while other threads read or bind the model); nullopt when the shapes
  // depend on input values.
  static std::optional<Graph> bound_copy(const Model& model, const ShapeMap& shapes);
  // Model::run_reference and run_reference_values, also telling the most the run held at once
  // (run_reference_values in reference_executor.h), for callers that budget memory.
  static TensorMap run_reference(Model& model, const TensorMap& inputs, const CancelToken& cancel, int64_t* peak_bytes);
  static ValueMap run_reference_values(Model& model, const ValueMap& inputs, const CancelToken& cancel,
                                       int64_t* peak_bytes);
};

// A model over a graph the caller imported (onnx/import.h); binds as Model::load does.
inline Model model_from_graph(Graph imported, const ShapeMap& shapes = {}, const Limits& limits = {}) {
  return ModelInternals::from_graph(std::move(imported), shapes, limits);
}
// The graph as imported.
inline const Graph& imported_graph(const Model& model) { return ModelInternals::imported(model); }
// The bound, optimised graph; throws when no shapes have been bound yet.
inline const Graph& bound_graph(const Model& model) { return ModelInternals::bound(model); }

}  // namespace grove
