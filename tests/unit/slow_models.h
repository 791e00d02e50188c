#pragma once
// Models that run long on purpose, for the cancellation tests (tests/unit/test_cancellation.cpp,
// tests/serve/test_inference_server.cpp): a planned run of many tiles, and an endless Loop.
#include <string>
#include <vector>

#include "onnx_builder.h"

// Sanitizer builds run the kernels some hundred times slower (a 512x512 MatMul tile takes
// seconds under ThreadSanitizer): the tests shrink their slow models and stretch their time
// limits by kSanitizerSlack there, and keep the tight limits in the other builds.
#if defined(__has_feature)  // clang spells the sanitizer checks this way
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define GROVE_SLOW_MODELS_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__) || defined(GROVE_SLOW_MODELS_SANITIZED)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif

namespace grove::test {

inline constexpr double kSanitizerSlack = kSanitizedBuild ? 20 : 1;

// y = x w w ... w: `layers` MatMuls of x ([rows, size]; rows -1: symbolic) by w ([size, size],
// 1/size everywhere, so the values stay those of x).
inline std::string matmul_chain_model(int layers, int rows, int size) {
  OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {rows, size}).output("y", onnx::TensorProto::FLOAT, {rows, size});
  b.initializer_f32("w", {size, size}, std::vector<float>(static_cast<size_t>(size) * static_cast<size_t>(size), 1.0f / static_cast<float>(size)));
  std::string last = "x";
  for (int i = 0; i < layers; ++i) {
    const std::string out = i + 1 == layers ? "y" : "h" + std::to_string(i);
    b.node("MatMul", {last, "w"}, {out}, "mm" + std::to_string(i));
    last = out;
  }
  return b.bytes();
}

// [size, size] by [size, size], `layers` times: one plan of many tiles, each a slice of a MatMul.
inline std::string slow_matmul_chain_model(int layers, int size) { return matmul_chain_model(layers, size, size); }

// [N, 8] by [8, 8], `layers` times (N symbolic): too small to take long to run, while planning
// each new N takes long (about 0.03 ms a node).
inline std::string slow_planning_model(int layers) { return matmul_chain_model(layers, -1, 8); }

// s = a Loop with no trip count whose condition stays true: s0 + x + x + ... for ever (or
// until Limits::max_loop_iterations). Each iteration is one planned job on the tile runtime.
inline std::string endless_loop_model() {
  OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {2}).input("s0", onnx::TensorProto::FLOAT, {2});
  b.output("s", onnx::TensorProto::FLOAT, {2});
  b.initializer_bool("go", {}, {true});
  OnnxBuilder body;
  body.input("i", onnx::TensorProto::INT64, {}).input("cond_in", onnx::TensorProto::BOOL, {});
  body.input("s_in", onnx::TensorProto::FLOAT, {2});
  body.node("Add", {"s_in", "x"}, {"s_out"}, "step");
  body.node("Identity", {"cond_in"}, {"cond_out"}, "keep_going");
  body.output("cond_out", onnx::TensorProto::BOOL, {}).output("s_out", onnx::TensorProto::FLOAT, {2});
  auto& node = b.node("Loop", {"", "go", "s0"}, {"s"}, "forever");
  auto* a = node.add_attribute();
  a->set_name("body");
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = body.proto().graph();
  return b.bytes();
}

}  // namespace grove::test
