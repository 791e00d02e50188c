#pragma once
// Small models written to a temporary model repository, and a server over them, for the
// in-process server tests.
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "onnx_builder.h"
#include "serve/inference_server.h"

namespace grove::test {

constexpr int kF32 = onnx::TensorProto::FLOAT;
constexpr int kI64 = onnx::TensorProto::INT64;

// y = x + [1, 2, 3] on x [2, 3].
inline std::string add_model() {
  OnnxBuilder b;
  b.input("x", kF32, {2, 3}).output("y", kF32, {2, 3});
  b.initializer_f32("c", {3}, {1, 2, 3});
  b.node("Add", {"x", "c"}, {"y"}, "add");
  return b.bytes();
}

// relu = Relu(x), neg = Neg(x) on x [N, 4]: a dynamic dim and two outputs.
inline std::string two_output_model() {
  OnnxBuilder b;
  b.input("x", kF32, {-1, 4}).output("relu", kF32, {-1, 4}).output("neg", kF32, {-1, 4});
  b.node("Relu", {"x"}, {"relu"}, "relu");
  b.node("Neg", {"x"}, {"neg"}, "neg");
  return b.bytes();
}

// y = Gather(table, i): an index past the table fails at run time, in the gather node.
inline std::string gather_model() {
  OnnxBuilder b;
  b.input("i", kI64, {2}).output("y", kF32, {2});
  b.initializer_f32("table", {4}, {10, 20, 30, 40});
  b.node("Gather", {"table", "i"}, {"y"}, "lookup");
  return b.bytes();
}

// A dynamic model (docs/dynamic.md): y = fc2(Relu(fc1(x))) on x [1, 4], fc1 with 8 outputs;
// sub-net `half` keeps 4 of them, `full` all.
inline std::string dynamic_model() {
  OnnxBuilder b;
  b.input("x", kF32, {1, 4}).output("y", kF32, {1, 3});
  std::vector<float> w1(32), w2(24);
  for (size_t i = 0; i < w1.size(); ++i) w1[i] = static_cast<float>(i % 7) * 0.25f - 0.5f;
  for (size_t i = 0; i < w2.size(); ++i) w2[i] = static_cast<float>(i % 5) * 0.3f - 0.4f;
  b.initializer_f32("w1", {8, 4}, w1);
  b.initializer_f32("w2", {3, 8}, w2);
  OnnxBuilder::attr_int(b.node("Gemm", {"x", "w1"}, {"h"}, "fc1"), "transB", 1);
  b.node("Relu", {"h"}, {"r"}, "relu");
  OnnxBuilder::attr_int(b.node("Gemm", {"r", "w2"}, {"y"}, "fc2"), "transB", 1);
  auto* p = b.proto().add_metadata_props();
  p->set_key("grove.subnets");
  p->set_value("subnet half ratio=0.5\nsubnet full ratio=1");
  return b.bytes();
}

class TempRepository {
 public:
  TempRepository() {
    dir_ = std::filesystem::temp_directory_path() / ("grove_serve_" + std::to_string(::getpid()) + "_" + std::to_string(reinterpret_cast<uintptr_t>(this)));
    std::filesystem::create_directories(dir_);
  }
  ~TempRepository() { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& file, const std::string& bytes) const {
    std::filesystem::path p = dir_ / file;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  std::string dir() const { return dir_.string(); }

 private:
  std::filesystem::path dir_;
};

}  // namespace grove::test
