#include "grove/value.h"

#include "grove/error.h"

namespace grove {

std::string_view value_kind_name(ValueKind kind) {
  switch (kind) {
    case ValueKind::tensor: return "tensor";
    case ValueKind::sequence: return "sequence";
    case ValueKind::optional_tensor: return "optional tensor";
    case ValueKind::optional_sequence: return "optional sequence";
  }
  return "?";
}

Value Value::sequence(DType element, std::vector<Tensor> items) {
  for (const Tensor& t : items)
    if (t.dtype() != element)
      throw Error("a sequence of " + std::string(dtype_name(element)) + " tensors cannot hold a " +
                  std::string(dtype_name(t.dtype())) + " tensor");
  Value v;
  v.kind_ = Kind::sequence;
  v.items_ = std::move(items);
  v.element_ = element;
  return v;
}

const Tensor& Value::tensor() const {
  if (kind_ != Kind::tensor) throw Error("expected a tensor, got " + describe());
  return tensor_;
}

const std::vector<Tensor>& Value::items() const {
  if (kind_ != Kind::sequence) throw Error("expected a sequence, got " + describe());
  return items_;
}

size_t Value::bytes() const {
  size_t n = tensor_.bytes();
  for (const Tensor& t : items_) n += t.bytes();
  return n;
}

std::string Value::describe() const {
  switch (kind_) {
    case Kind::tensor: return "a tensor";
    case Kind::sequence:
      return "a sequence of " + std::to_string(items_.size()) + " " + std::string(dtype_name(element_)) + " tensor" +
             (items_.size() == 1 ? "" : "s");
    case Kind::none: return "an empty optional";
  }
  return "?";
}

ValueMap to_values(const TensorMap& tensors) {
  ValueMap values;
  for (const auto& [name, t] : tensors) values.emplace(name, t);
  return values;
}

TensorMap to_tensors(const ValueMap& values, const std::string& context) {
  TensorMap tensors;
  for (const auto& [name, v] : values) {
    if (!v.is_tensor())
      throw Error(context + "'" + name + "' is " + v.describe() +
                  ", not a tensor; the CLI, Python and the server carry tensors only (the C++ API's "
                  "Session::run_values carries sequences and optionals)");
    tensors.emplace(name, v.tensor());
  }
  return tensors;
}

}  // namespace grove
