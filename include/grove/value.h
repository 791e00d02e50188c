#pragma once
// What an ONNX value can be besides one tensor: a sequence of tensors, or an optional that
// holds nothing. An optional that holds something is simply that tensor or sequence.
// Models whose inputs or outputs are sequences or optionals run through
// Model::run_reference_values and Session::run_values; every other model needs none of this.
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "grove/tensor.h"

namespace grove {

// How a model declares an input or output.
enum class ValueKind : uint8_t { tensor, sequence, optional_tensor, optional_sequence };
std::string_view value_kind_name(ValueKind kind);

class Value {
 public:
  enum class Kind : uint8_t { tensor, sequence, none };

  Value() = default;  // an optional holding nothing
  Value(Tensor t) : kind_(Kind::tensor), tensor_(std::move(t)) {}  // NOLINT: a tensor is a value
  // A sequence of tensors of one dtype (`element` names it even when `items` is empty).
  static Value sequence(DType element, std::vector<Tensor> items);

  Kind kind() const { return kind_; }
  bool is_tensor() const { return kind_ == Kind::tensor; }
  bool is_sequence() const { return kind_ == Kind::sequence; }
  bool is_none() const { return kind_ == Kind::none; }

  // The tensor, or an Error saying what the value is instead.
  const Tensor& tensor() const;
  // The sequence's tensors, or an Error saying what the value is instead.
  const std::vector<Tensor>& items() const;
  DType element_dtype() const { return element_; }
  size_t bytes() const;
  // "a tensor", "a sequence of 3 float32 tensors", "an empty optional": for messages.
  std::string describe() const;

 private:
  Kind kind_ = Kind::none;
  Tensor tensor_;
  std::vector<Tensor> items_;
  DType element_ = DType::undefined;
};

using ValueMap = std::map<std::string, Value>;

// Tensors as values, and back (an Error naming the first value that is not a tensor).
ValueMap to_values(const TensorMap& tensors);
TensorMap to_tensors(const ValueMap& values, const std::string& context);

}  // namespace grove
