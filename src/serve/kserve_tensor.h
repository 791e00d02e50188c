#pragma once
// Tensors in the Open Inference Protocol (KServe v2): datatype names, JSON "data" arrays
// (flat, or nested as Triton also accepts) and the raw little-endian bytes of the binary
// tensor data extension.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "graph/tensor.h"

namespace grove::serve {

// "FP32", "INT64", "BOOL", ...; "" for a dtype the protocol has no name for.
std::string_view kserve_datatype(DType dtype);
// DType::undefined for an unknown name (and for "BYTES": grove has no string tensors).
DType dtype_from_kserve(std::string_view name);

// The tensor `name` from its JSON "data": exactly numel(shape) values of the datatype's kind,
// flat or nested. Throws HttpError(400) naming the tensor otherwise.
Tensor tensor_from_json(const std::string& name, DType dtype, const Shape& shape, const nlohmann::json& data);
// The tensor `name` from `bytes`, which must be exactly its size. Throws HttpError(400).
Tensor tensor_from_bytes(const std::string& name, DType dtype, const Shape& shape, std::string_view bytes);

// A flat JSON array of the values (float16 as numbers).
nlohmann::json tensor_to_json(const Tensor& tensor);

}  // namespace grove::serve
