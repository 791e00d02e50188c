// The elementwise family's entry point and the dtype checks its parts share.
#include "ops/elementwise/elementwise.h"

namespace grove {
namespace elementwise {

bool dtype_in_set(DType dtype, unsigned set) {
  switch (dtype) {
    case DType::f32: case DType::f64: return set & kFloat;
    case DType::i8: case DType::i16: case DType::i32: case DType::i64: return set & kSigned;
    case DType::u8: case DType::u16: case DType::u32: case DType::u64: return set & kUnsigned;
    case DType::boolean: return set & kBool;
    default: return false;
  }
}

void require_dtype(const Node& node, DType dtype, unsigned set, const char* what) {
  if (dtype_in_set(dtype, set)) return;
  std::string message = node.describe() + ": " + what + " of dtype " + std::string(dtype_name(dtype)) + " is not supported";
  // float16 and bfloat16 are valid ONNX wherever float is: a gap in grove, not a bad model.
  bool valid_onnx = ((dtype == DType::f16 || dtype == DType::bf16) && (set & kFloat)) || dtype == DType::undefined || dtype == DType::string;
  if (valid_onnx) throw Unsupported(message);
  throw Error(message);
}

}  // namespace elementwise

void register_elementwise_ops(OpRegistry& r) {
  elementwise::register_unary_math_ops(r);
  elementwise::register_arithmetic_ops(r);
  elementwise::register_compare_logic_ops(r);
  elementwise::register_cast_ops(r);
}

}  // namespace grove
