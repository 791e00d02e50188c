// ONNX import: weight encodings, external data, Constant nodes and the errors for bad files.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "onnx/import.h"
#include "onnx_builder.h"

using namespace grove;
using grove::test::OnnxBuilder;

namespace {
constexpr int kFloat = onnx::TensorProto::FLOAT;

OnnxBuilder add_model() {
  OnnxBuilder b;
  b.input("x", kFloat, {2}).output("y", kFloat, {2});
  b.node("Add", {"x", "w"}, {"y"}, "add");
  return b;
}

std::string temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("grove_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}
}  // namespace

TEST(Import, RawAndTypedInitializers) {
  for (bool raw : {true, false}) {
    OnnxBuilder b = add_model();
    b.initializer_f32("w", {2}, {1.5f, -2.f}, raw);
    Graph g = load_onnx_bytes(b.bytes(), "mem.onnx");
    ASSERT_EQ(g.initializers.count("w"), 1u);
    EXPECT_EQ(g.initializers["w"].shape(), (Shape{2}));
    EXPECT_EQ(g.initializers["w"].data<float>()[1], -2.f);
    ASSERT_EQ(g.inputs.size(), 1u);  // the initializer is not a runtime input
    EXPECT_EQ(g.nodes.size(), 1u);
    EXPECT_EQ(g.opsets[""], 13);
  }
}

TEST(Import, Float16InitializerIsWidened) {
  OnnxBuilder b = add_model();
  auto* t = b.proto().mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT16);
  t->add_dims(2);
  uint16_t half[2] = {0x3c00, 0xc000};  // 1.0, -2.0
  t->set_raw_data(std::string(reinterpret_cast<const char*>(half), 4));
  Graph g = load_onnx_bytes(b.bytes(), "mem.onnx");
  EXPECT_EQ(g.initializers["w"].dtype(), DType::f32);
  EXPECT_EQ(g.initializers["w"].data<float>()[0], 1.f);
  EXPECT_EQ(g.initializers["w"].data<float>()[1], -2.f);
}

TEST(Import, ConstantNodeBecomesInitializer) {
  OnnxBuilder b;
  b.input("x", kFloat, {2}).output("y", kFloat, {2});
  auto& c = b.node("Constant", {}, {"w"}, "const");
  auto* a = c.add_attribute();
  a->set_name("value_floats");
  a->set_type(onnx::AttributeProto::FLOATS);
  a->add_floats(3.f);
  a->add_floats(4.f);
  b.node("Add", {"x", "w"}, {"y"}, "add");
  Graph g = load_onnx_bytes(b.bytes(), "mem.onnx");
  EXPECT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.initializers["w"].data<float>()[1], 4.f);
}

TEST(Import, ExternalDataBesideTheModel) {
  std::string dir = temp_dir("external");
  float values[2] = {7.f, 8.f};
  {
    std::ofstream f(dir + "/weights.bin", std::ios::binary);
    f.write("pad!", 4);  // the tensor starts at offset 4
    f.write(reinterpret_cast<const char*>(values), 8);
  }
  OnnxBuilder b = add_model();
  auto* t = b.proto().mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(kFloat);
  t->add_dims(2);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add_kv = [&](const char* k, const char* v) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add_kv("location", "weights.bin");
  add_kv("offset", "4");
  add_kv("length", "8");
  Graph g = load_onnx_bytes(b.bytes(), dir + "/model.onnx");
  EXPECT_EQ(g.initializers["w"].data<float>()[1], 8.f);

  std::filesystem::remove(dir + "/weights.bin");
  try {
    load_onnx_bytes(b.bytes(), dir + "/model.onnx");
    FAIL() << "missing external data must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("weights.bin"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'w'"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST(Import, TruncatedAndCorruptBytes) {
  OnnxBuilder b = add_model();
  b.initializer_f32("w", {2}, {1.f, 2.f});
  std::string bytes = b.bytes();
  for (size_t cut : {size_t{0}, size_t{1}, bytes.size() / 2, bytes.size() - 1}) {
    try {
      load_onnx_bytes(std::string_view(bytes).substr(0, cut), "cut.onnx");
      FAIL() << "a model cut at " << cut << " bytes must not load";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cut.onnx"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(load_onnx_bytes("this is not a protobuf at all", "junk.onnx"), Error);
  EXPECT_THROW(load_onnx("/nonexistent/model.onnx"), Error);
}

TEST(Import, UnsupportedOpsAreListedTogether) {
  OnnxBuilder b;
  b.input("x", kFloat, {2}).output("y", kFloat, {2});
  b.node("FancyOp", {"x"}, {"a"}, "fancy1");
  b.node("FancyOp", {"a"}, {"b"}, "fancy2");
  b.node("OtherOp", {"b"}, {"y"}, "other");
  try {
    load_onnx_bytes(b.bytes(), "m.onnx");
    FAIL() << "unsupported ops must throw";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_TRUE(e.unsupported());
    EXPECT_NE(msg.find("FancyOp (2 nodes: fancy1, fancy2)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("OtherOp (1 node: other)"), std::string::npos) << msg;
  }
}
