#pragma once
// A loaded model: the graph as imported, and a copy bound to concrete input shapes and
// optimised. Binding happens at load when every input shape is known (declared or given),
// otherwise on the first run; inputs of a new shape re-bind.
#include <optional>
#include <string>

#include "graph/bind.h"
#include "runtime/reference_executor.h"

namespace grove {

class Model {
 public:
  // `limits` bound what the model may make grove allocate (graph/limits.h): checked at load
  // and at every binding.
  explicit Model(Graph imported, const ShapeMap& shapes = {}, const Limits& limits = {});

  // Loads an ONNX file; binds now if the input shapes can be resolved from `shapes` and the
  // model's declarations. Errors from binding are raised only when `shapes` was non-empty
  // (the user asked for these shapes); otherwise binding waits for the first inputs.
  static Model load(const std::string& path, const ShapeMap& shapes = {}, const Limits& limits = {});

  bool is_bound() const { return bound_.has_value(); }
  void bind(const ShapeMap& shapes);
  // Binds, or returns false (recording unbound_reason()) when the shapes depend on input
  // values; other errors throw.
  bool try_bind(const ShapeMap& shapes);
  const Graph& imported() const { return imported_; }
  // The bound, optimised graph; throws when no shapes have been bound yet.
  const Graph& graph() const;

  // Runs with the reference executor, re-binding first when the input shapes changed. A graph
  // whose shapes depend on input values (Reshape to a shape given as an input, ...) cannot be
  // bound statically; the reference executor then runs the imported graph as it is, inferring
  // every node's shapes from the actual tensors.
  TensorMap run_reference(const TensorMap& inputs);

  // Why the last binding attempt left the model unbound ("" when bound or never tried).
  const std::string& unbound_reason() const { return unbound_reason_; }
  const Limits& limits() const { return limits_; }

 private:
  Graph imported_;
  Limits limits_;
  std::optional<Graph> bound_;
  std::string unbound_reason_;
};

}  // namespace grove
