#pragma once
// A loaded model: the graph as imported, and a copy bound to concrete input shapes and
// optimised. Binding happens at load when every input shape is known (declared or given),
// otherwise on the first run; inputs of a new shape re-bind.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "grove/cancel.h"
#include "grove/limits.h"
#include "grove/tensor.h"
#include "grove/value.h"

namespace grove {

// A model input or output as declared: a dim of -1 is dynamic (named by dim_params[i], or
// unnamed when that is empty). `shape_known` is false when the model declares no shape.
struct ValueSpec {
  std::string name;
  DType dtype = DType::undefined;  // of the tensor, or of a sequence's tensors
  std::vector<int64_t> dims;
  std::vector<std::string> dim_params;
  bool shape_known = true;
  ValueKind kind = ValueKind::tensor;
};

// What an ONNX file says about itself (ModelProto's fields and metadata_props).
struct ModelMetadata {
  std::string producer_name, producer_version, graph_name, domain, description, graph_description;
  int64_t version = 0;
  std::map<std::string, std::string> custom;  // metadata_props
};

class Model {
 public:
  // Loads an ONNX file; binds now if the input shapes can be resolved from `shapes` and the
  // model's declarations. Errors from binding are raised only when `shapes` was non-empty
  // (the user asked for these shapes); otherwise binding waits for the first inputs.
  // `limits` bound what the model may make grove allocate: checked at load and every binding.
  static Model load(const std::string& path, const ShapeMap& shapes = {}, const Limits& limits = {});
  Model(const Model& other);
  Model(Model&&) noexcept;
  Model& operator=(const Model& other);
  Model& operator=(Model&&) noexcept;
  ~Model();

  const std::string& path() const;
  std::vector<ValueSpec> inputs() const;   // runtime inputs, in the model's order
  std::vector<ValueSpec> outputs() const;
  ModelMetadata metadata() const;

  bool is_bound() const;
  void bind(const ShapeMap& shapes);
  // Binds, or returns false (recording unbound_reason()) when the shapes depend on input
  // values; other errors throw.
  bool try_bind(const ShapeMap& shapes);
  // Why the last binding attempt left the model unbound ("" when bound or never tried).
  const std::string& unbound_reason() const;
  const Limits& limits() const;

  // Runs with the reference executor (naive, one thread: the oracle), re-binding first when
  // the input shapes changed. A graph whose shapes depend on input values (Reshape to a shape
  // given as an input, ...) cannot be bound statically; the reference executor then runs the
  // imported graph as it is, inferring every node's shapes from the actual tensors. Once
  // `cancel` stops, no further node (or Loop iteration) starts and the run throws an Error of
  // kind `cancelled` (grove/cancel.h).
  TensorMap run_reference(const TensorMap& inputs, const CancelToken& cancel = {});
  // The same for models whose inputs or outputs are sequences or optionals (grove/value.h).
  ValueMap run_reference_values(const ValueMap& inputs, const CancelToken& cancel = {});

 private:
  // The library's own access (src/runtime/model.h): a model over a graph it imported itself,
  // and the graphs inside (as imported, and bound). Not part of the API.
  friend struct ModelInternals;
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace grove
