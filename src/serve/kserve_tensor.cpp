#include "serve/kserve_tensor.h"

#include <cstring>

#include "serve/http_types.h"

namespace grove::serve {
namespace {

struct NamedType {
  DType dtype;
  std::string_view name;
};

constexpr NamedType kTypes[] = {
    {DType::boolean, "BOOL"}, {DType::u8, "UINT8"},  {DType::u16, "UINT16"}, {DType::u32, "UINT32"},
    {DType::u64, "UINT64"},   {DType::i8, "INT8"},   {DType::i16, "INT16"},  {DType::i32, "INT32"},
    {DType::i64, "INT64"},    {DType::f16, "FP16"},  {DType::f32, "FP32"},   {DType::f64, "FP64"},
};

// Appends the leaves of a (possibly nested) JSON array in order, refusing more than `limit` so
// a hostile body cannot make the server copy more values than the tensor holds. Iterative (an
// explicit stack of array positions): the depth of `data` is the client's to choose.
void flatten(const nlohmann::json& j, std::vector<const nlohmann::json*>& out, size_t limit, const std::string& name) {
  auto leaf = [&](const nlohmann::json& v) {
    if (out.size() >= limit) throw HttpError(400, "input '" + name + "': more data values than its shape holds");
    out.push_back(&v);
  };
  if (!j.is_array()) return leaf(j);
  using It = nlohmann::json::const_iterator;
  std::vector<std::pair<It, It>> stack{{j.begin(), j.end()}};
  while (!stack.empty()) {
    auto& [it, end] = stack.back();
    if (it == end) {
      stack.pop_back();
      continue;
    }
    const nlohmann::json& e = *it++;
    if (e.is_array()) stack.emplace_back(e.begin(), e.end());  // invalidates `it`, `end`: not used again
    else leaf(e);
  }
}

template <class T>
T value_of(const nlohmann::json& v, const std::string& name) {
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) throw HttpError(400, "input '" + name + "': BOOL data must be true or false");
    return v.get<bool>();
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) throw HttpError(400, "input '" + name + "': data must be numbers");
    return static_cast<T>(v.get<double>());
  } else {
    if (!v.is_number_integer()) throw HttpError(400, "input '" + name + "': integer data must be integers");
    if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<T>::max()))
        throw HttpError(400, "input '" + name + "': a value is out of range for its datatype");
      return static_cast<T>(u);
    }
    int64_t i = v.get<int64_t>();
    if (i < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        (i > 0 && static_cast<uint64_t>(i) > static_cast<uint64_t>(std::numeric_limits<T>::max())))
      throw HttpError(400, "input '" + name + "': a value is out of range for its datatype");
    return static_cast<T>(i);
  }
}

int64_t checked_numel(const std::string& name, const Shape& shape) {
  try {
    return numel(shape);
  } catch (const Error& e) {
    throw HttpError(400, "input '" + name + "': bad shape " + shape_str(shape) + " (" + e.what() + ")");
  }
}

}  // namespace

std::string_view kserve_datatype(DType dtype) {
  for (const NamedType& t : kTypes)
    if (t.dtype == dtype) return t.name;
  return "";
}

DType dtype_from_kserve(std::string_view name) {
  for (const NamedType& t : kTypes)
    if (t.name == name) return t.dtype;
  return DType::undefined;
}

Tensor tensor_from_json(const std::string& name, DType dtype, const Shape& shape, const nlohmann::json& data) {
  const int64_t n = checked_numel(name, shape);
  std::vector<const nlohmann::json*> values;
  flatten(data, values, static_cast<size_t>(n), name);
  if (static_cast<int64_t>(values.size()) != n)
    throw HttpError(400, "input '" + name + "': shape " + shape_str(shape) + " holds " + std::to_string(n) + " values, data has " +
                             std::to_string(values.size()));
  Tensor t(dtype, shape);
  if (dtype == DType::f16) {
    auto* out = reinterpret_cast<uint16_t*>(t.raw());
    for (int64_t i = 0; i < n; ++i) out[i] = f64_to_f16(value_of<double>(*values[static_cast<size_t>(i)], name));
    return t;
  }
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* out = t.data<T>();
    for (int64_t i = 0; i < n; ++i) out[i] = value_of<T>(*values[static_cast<size_t>(i)], name);
  });
  return t;
}

Tensor tensor_from_bytes(const std::string& name, DType dtype, const Shape& shape, std::string_view bytes) {
  const int64_t n = checked_numel(name, shape);
  const size_t want = static_cast<size_t>(n) * dtype_size(dtype);
  if (bytes.size() != want)
    throw HttpError(400, "input '" + name + "': binary_data_size is " + std::to_string(bytes.size()) + " bytes, shape " +
                             shape_str(shape) + " needs " + std::to_string(want));
  Tensor t(dtype, shape);
  if (want) std::memcpy(t.raw(), bytes.data(), want);
  if (dtype == DType::boolean)
    for (size_t i = 0; i < want; ++i)
      if (static_cast<uint8_t>(t.raw()[i]) > 1) throw HttpError(400, "input '" + name + "': BOOL bytes must be 0 or 1");
  return t;
}

nlohmann::json tensor_to_json(const Tensor& tensor) {
  nlohmann::json out = nlohmann::json::array();
  if (tensor.dtype() == DType::f16) {
    const auto* h = reinterpret_cast<const uint16_t*>(tensor.raw());
    for (int64_t i = 0; i < tensor.numel(); ++i) out.push_back(f16_to_f32(h[i]));
    return out;
  }
  visit_dtype(tensor.dtype(), [&](auto zero) {
    using T = decltype(zero);
    for (T v : tensor.span<T>()) out.push_back(v);
  });
  return out;
}

}  // namespace grove::serve
