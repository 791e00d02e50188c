// Sequence and optional values (grove/value.h, ops/control_flow/sequence.h): the reference executor and
// the tile runtime (sequence ops run between planned segments, runtime/segmented_graph.h)
// must give the hand-computed values; misuse is a one-line error naming the node and op.
#include <gtest/gtest.h>

#include "grove/grove.h"
#include "onnx/import.h"
#include "onnx_builder.h"
#include "runtime/model.h"

using namespace grove;
using grove::test::OnnxBuilder;

namespace {
constexpr int kFloat = onnx::TensorProto::FLOAT;
constexpr int kInt64 = onnx::TensorProto::INT64;

void sequence_output(OnnxBuilder& b, const std::string& name, int elem_type) {
  auto* v = b.proto().mutable_graph()->add_output();
  v->set_name(name);
  v->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(elem_type);
}

void sequence_input(OnnxBuilder& b, const std::string& name, int elem_type) {
  auto* v = b.proto().mutable_graph()->add_input();
  v->set_name(name);
  v->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(elem_type);
}

Tensor iota(Shape shape) {
  Tensor t(DType::f32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}

// Outputs of the reference executor and of the tile runtime at 1 and 2 workers, both schedules.
std::vector<ValueMap> run_everywhere(const Graph& g, const ValueMap& inputs) {
  std::vector<ValueMap> results{model_from_graph(g).run_reference_values(inputs)};
  for (int threads : {1, 2})
    for (Schedule schedule : {Schedule::aspen, Schedule::barrier}) {
      Engine engine({.threads = threads, .pin = false});
      Session session(engine, model_from_graph(g), {.schedule = schedule});
      for (int again = 0; again < 2; ++again) results.push_back(session.run_values(inputs));
    }
  return results;
}

void expect_values(const Value& v, const Shape& shape, std::vector<float> want) {
  ASSERT_TRUE(v.is_tensor()) << v.describe();
  const Tensor& t = v.tensor();
  EXPECT_EQ(t.shape(), shape);
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(t.data<float>()[i], want[i]) << "element " << i;
}

// An Optional with no input: an empty optional of float32 tensors, named `name`.
void empty_optional(OnnxBuilder& b, const std::string& name) {
  auto& none = b.node("Optional", {}, {name}, "nothing");
  auto* type = none.add_attribute();
  type->set_name("type");
  type->set_type(onnx::AttributeProto::TYPE_PROTO);
  type->mutable_tp()->mutable_tensor_type()->set_elem_type(kFloat);
}

std::vector<float> range(float from, float to) {
  std::vector<float> v;
  for (float x = from; x < to; ++x) v.push_back(x);
  return v;
}

std::string error_of(const Graph& g, const ValueMap& inputs, bool tiles) {
  try {
    if (!tiles) {
      model_from_graph(g).run_reference_values(inputs);
    } else {
      Engine engine({.threads = 2, .pin = false});
      Session(engine, model_from_graph(g)).run_values(inputs);
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// x [4,3] = 0..11 split into rows; the sequence ops rearrange them; an Add after them runs tiled.
Graph rows_model() {
  OnnxBuilder b(17);
  b.input("x", kFloat, {4, 3});
  b.output("n", kInt64, {}).output("last", kFloat, {3}).output("stacked2", kFloat, {3, 3}).output("cat", kFloat, {12});
  b.initializer_i64("minus1", {}, {-1});
  b.initializer_i64("zero", {}, {0});
  auto& split = b.node("SplitToSequence", {"x"}, {"rows"}, "split");
  OnnxBuilder::attr_int(split, "keepdims", 0);
  b.node("SequenceLength", {"rows"}, {"n"}, "length");
  b.node("SequenceAt", {"rows", "minus1"}, {"last"}, "at");
  b.node("SequenceErase", {"rows", "zero"}, {"rest"}, "erase");
  auto& stack = b.node("ConcatFromSequence", {"rest"}, {"stacked"}, "stack");
  OnnxBuilder::attr_int(stack, "axis", 0);
  OnnxBuilder::attr_int(stack, "new_axis", 1);
  b.node("Add", {"stacked", "stacked"}, {"stacked2"}, "double");
  b.node("SequenceInsert", {"rest", "last", "zero"}, {"front"}, "insert");
  auto& cat = b.node("ConcatFromSequence", {"front"}, {"cat"}, "concat");
  OnnxBuilder::attr_int(cat, "axis", 0);
  return load_onnx_bytes(b.bytes(), "rows.onnx");
}

}  // namespace

TEST(Sequence, OpsRearrangeRowsAlikeOnEveryExecutor) {
  const Graph g = rows_model();
  std::vector<float> doubled;
  for (float v : range(3, 12)) doubled.push_back(2 * v);
  std::vector<float> cat = {9, 10, 11};
  for (float v : range(3, 12)) cat.push_back(v);
  for (const ValueMap& out : run_everywhere(g, {{"x", iota({4, 3})}})) {
    ASSERT_TRUE(out.at("n").is_tensor());
    EXPECT_EQ(out.at("n").tensor().to_i64(), std::vector<int64_t>{4});
    expect_values(out.at("last"), {3}, {9, 10, 11});
    expect_values(out.at("stacked2"), {3, 3}, doubled);
    expect_values(out.at("cat"), {12}, cat);
  }
  // All outputs are tensors: the plain tensor API runs it too, sequence ops between segments.
  Engine engine({.threads = 2, .pin = false});
  Session session(engine, model_from_graph(g));
  RunStats stats;
  TensorMap out = session.run({{"x", iota({4, 3})}}, &stats);
  expect_values(Value(out.at("cat")), {12}, cat);
  EXPECT_GT(stats.segment_runs, 0);
}

TEST(Sequence, SplitToSequenceBySizeAndBySizesThenConcatGivesTheInputBack) {
  for (bool scalar_split : {true, false}) {
    OnnxBuilder b(17);
    b.input("x", kFloat, {2, 7});
    b.output("y", kFloat, {2, 7}).output("n", kInt64, {}).output("first", kFloat, {2, 3});
    if (scalar_split) b.initializer_i64("split", {}, {3});
    else b.initializer_i64("split", {3}, {3, 3, 1});
    auto& split = b.node("SplitToSequence", {"x", "split"}, {"parts"}, "split");
    OnnxBuilder::attr_int(split, "axis", 1);
    b.node("SequenceLength", {"parts"}, {"n"}, "length");
    b.initializer_i64("zero", {}, {0});
    b.node("SequenceAt", {"parts", "zero"}, {"first"}, "at");
    auto& cat = b.node("ConcatFromSequence", {"parts"}, {"y"}, "concat");
    OnnxBuilder::attr_int(cat, "axis", -1);
    const Graph g = load_onnx_bytes(b.bytes(), "split.onnx");
    for (const ValueMap& out : run_everywhere(g, {{"x", iota({2, 7})}})) {
      expect_values(out.at("y"), {2, 7}, range(0, 14));
      EXPECT_EQ(out.at("n").tensor().to_i64(), std::vector<int64_t>{3});
      expect_values(out.at("first"), {2, 3}, {0, 1, 2, 7, 8, 9});
    }
  }
}

TEST(Sequence, SequenceInputsAndOutputsPassThroughRunValues) {
  OnnxBuilder b(17);
  sequence_input(b, "seq", kFloat);
  b.input("t", kFloat, {2});
  sequence_output(b, "out", kFloat);
  b.node("SequenceInsert", {"seq", "t"}, {"out"}, "append");
  const Graph g = load_onnx_bytes(b.bytes(), "append.onnx");
  Tensor a = iota({3}), t = iota({2});
  for (const ValueMap& out : run_everywhere(g, {{"seq", Value::sequence(DType::f32, {a})}, {"t", t}})) {
    ASSERT_TRUE(out.at("out").is_sequence()) << out.at("out").describe();
    ASSERT_EQ(out.at("out").items().size(), 2u);
    expect_values(out.at("out").items()[0], {3}, {0, 1, 2});
    expect_values(out.at("out").items()[1], {2}, {0, 1});
  }
  // The tensor API says where sequences go instead of failing somewhere inside.
  Engine engine({.threads = 1, .pin = false});
  Session session(engine, model_from_graph(g));
  try {
    session.run({{"t", t}});
    FAIL() << "a sequence input given through the tensor API must be an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 'seq' is a sequence; pass it with run_values"), std::string::npos)
        << e.what();
  }
  // A sequence of the wrong element type is refused by name.
  const std::string wrong = error_of(g, {{"seq", Value::sequence(DType::i64, {})}, {"t", t}}, true);
  EXPECT_NE(wrong.find("input 'seq' must hold float32, got int64"), std::string::npos) << wrong;
}

TEST(Sequence, OptionalsHoldAValueOrNothing) {
  OnnxBuilder b(18);
  b.input("x", kFloat, {2});
  b.output("has", onnx::TensorProto::BOOL, {}).output("has_not", onnx::TensorProto::BOOL, {}).output("y", kFloat, {2});
  b.node("Optional", {"x"}, {"some"}, "wrap");
  empty_optional(b, "none");
  b.node("OptionalHasElement", {"some"}, {"has"}, "has");
  b.node("OptionalHasElement", {"none"}, {"has_not"}, "has_not");
  b.node("OptionalGetElement", {"some"}, {"got"}, "get");
  b.node("Neg", {"got"}, {"y"}, "neg");
  const Graph g = load_onnx_bytes(b.bytes(), "optional.onnx");
  for (const ValueMap& out : run_everywhere(g, {{"x", iota({2})}})) {
    EXPECT_TRUE(out.at("has").tensor().data<bool>()[0]);
    EXPECT_FALSE(out.at("has_not").tensor().data<bool>()[0]);
    expect_values(out.at("y"), {2}, {-0.0f, -1});
  }
}

TEST(Sequence, MisuseIsAnErrorNamingTheNode) {
  struct Case {
    const char* what;
    std::function<void(OnnxBuilder&)> build;
    const char* want;
  };
  const std::vector<Case> cases = {
      {"position past the end",
       [](OnnxBuilder& b) {
         b.initializer_i64("four", {}, {4});
         b.node("SequenceAt", {"rows", "four"}, {"y"}, "at");
       },
       "node 'at' (SequenceAt): position 4 is out of range [-4, 3] for a sequence of 4"},
      {"a tensor op reading a sequence",
       [](OnnxBuilder& b) { b.node("Relu", {"rows"}, {"y"}, "relu"); },
       "node 'relu' (Relu): input 'rows' is a sequence of 4 float32 tensors; the op takes tensors"},
      {"items that do not fit together",
       [](OnnxBuilder& b) {
         b.initializer_i64("sizes", {2}, {1, 3});
         b.node("SplitToSequence", {"x", "sizes"}, {"uneven"}, "split2");
         auto& cat = b.node("ConcatFromSequence", {"uneven"}, {"y"}, "cat");
         OnnxBuilder::attr_int(cat, "axis", 0);
         OnnxBuilder::attr_int(cat, "new_axis", 1);
       },
       "node 'cat' (ConcatFromSequence): sequence items of shapes 1x3 and 3x3 cannot be concatenated along axis 0"},
      {"split sizes that do not add up",
       [](OnnxBuilder& b) {
         b.initializer_i64("sizes", {2}, {1, 2});
         b.node("SplitToSequence", {"x", "sizes"}, {"y"}, "split2");
       },
       "node 'split2' (SplitToSequence): split sizes add up to 3, the axis has 4"},
      {"getting from an empty optional",
       [](OnnxBuilder& b) {
         empty_optional(b, "none");
         b.node("OptionalGetElement", {"none"}, {"y"}, "get");
       },
       "node 'get' (OptionalGetElement): the optional input holds no value"},
  };
  for (const Case& c : cases) {
    OnnxBuilder b(18);
    b.input("x", kFloat, {4, 3}).output("y", kFloat, {});
    b.node("SplitToSequence", {"x"}, {"rows"}, "split");
    c.build(b);
    const Graph g = load_onnx_bytes(b.bytes(), "bad.onnx");
    for (bool tiles : {false, true}) {
      const std::string e = error_of(g, {{"x", iota({4, 3})}}, tiles);
      EXPECT_NE(e.find(c.want), std::string::npos) << c.what << (tiles ? " (tiles)" : " (reference)") << ": " << e;
      EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    }
  }
}
