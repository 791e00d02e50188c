// Import of graphs as exporters really write them: nodes out of order (topological sort),
// cycles, initializers that are also graph inputs (overridable defaults), and value_info that
// is missing or wrong.
#include <gtest/gtest.h>

#include "passes/passes.h"
#include "runtime/session.h"
#include "plan_test_util.h"
#include "runtime/reference_executor.h"

namespace grove {
namespace {

using namespace grove::test;

// y = Relu(x * w + b) - x, with the nodes written in `order` (a permutation of 0..3).
std::string chain_model(std::vector<int> order) {
  OnnxBuilder b(13);
  b.input("x", kF32, {2, 3}).output("y", kF32, {2, 3});
  weight(b, "w", {3}, 1);
  weight(b, "b", {3}, 2);
  for (int k : order) {
    if (k == 0) b.node("Mul", {"x", "w"}, {"m"}, "mul");
    if (k == 1) b.node("Add", {"m", "b"}, {"a"}, "add");
    if (k == 2) b.node("Relu", {"a"}, {"r"}, "relu");
    if (k == 3) b.node("Sub", {"r", "x"}, {"y"}, "sub");
  }
  return b.bytes();
}

Tensor f32(Shape shape, std::vector<float> values) { return Tensor::from<float>(std::move(shape), values); }

std::vector<std::string> node_names(const Graph& g) {
  std::vector<std::string> names;
  for (const auto& n : g.nodes) names.push_back(n.name);
  return names;
}

TEST(ImportGraph, NodesOutOfOrderAreSortedAndComputeTheSame) {
  Graph ordered = load_onnx_bytes(chain_model({0, 1, 2, 3}), "ordered.onnx");
  const std::vector<std::string> want = {"mul", "add", "relu", "sub"};
  EXPECT_EQ(node_names(ordered), want);
  TensorMap in = {{"x", seeded_tensor({2, 3}, 7)}};
  TensorMap expected = model_from_graph(ordered).run_reference(in);
  for (std::vector<int> order : {std::vector<int>{3, 2, 1, 0}, {2, 0, 3, 1}, {1, 3, 0, 2}}) {
    Graph shuffled = load_onnx_bytes(chain_model(order), "shuffled.onnx");
    EXPECT_EQ(node_names(shuffled), want);
    expect_close(model_from_graph(shuffled).run_reference(in), expected, 0, "shuffled");
  }
}

TEST(ImportGraph, SortKeepsTheFileOrderOfIndependentNodes) {
  OnnxBuilder b(13);
  b.input("x", kF32, {2}).output("y", kF32, {2});
  b.node("Add", {"p", "q"}, {"y"}, "join");  // written first, read last
  b.node("Neg", {"x"}, {"q"}, "second");
  b.node("Relu", {"x"}, {"p"}, "first");
  Graph g = load_onnx_bytes(b.bytes(), "m.onnx");
  EXPECT_EQ(node_names(g), (std::vector<std::string>{"second", "first", "join"}));
}

TEST(ImportGraph, CycleIsAnErrorNamingItsNodes) {
  OnnxBuilder b(13);
  b.input("x", kF32, {2}).output("y", kF32, {2});
  b.node("Relu", {"x"}, {"r"}, "entry");
  b.node("Add", {"r", "c"}, {"a"}, "loop_add");
  b.node("Neg", {"a"}, {"c"}, "loop_neg");
  b.node("Sigmoid", {"a"}, {"y"}, "exit");
  try {
    load_onnx_bytes(b.bytes(), "cycle.onnx");
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("cycle.onnx: the graph has a cycle"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'loop_add'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'loop_neg'"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("'exit'"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(ImportGraph, TwoProducersOfOneValueIsAnError) {
  OnnxBuilder b(13);
  b.input("x", kF32, {2}).output("y", kF32, {2});
  b.node("Relu", {"x"}, {"y"}, "one");
  b.node("Neg", {"x"}, {"y"}, "two");
  EXPECT_THROW(load_onnx_bytes(b.bytes(), "twice.onnx"), Error);
}

// As onnxconverter-common's float16 conversion writes a model: float16 weights, the input
// Cast to float16 by a node written last, the output Cast back to float32.
TEST(ImportGraph, Float16ConvertedModelRunsInFloat32WithTheCastsRounding) {
  OnnxBuilder b(13);
  b.input("x", kF32, {2, 3}).output("y", kF32, {2, 3});
  auto* w = b.proto().mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT16);
  w->add_dims(3);
  uint16_t half[3] = {0x3e00, 0xc000, 0x3c00};  // 1.5, -2, 1
  w->set_raw_data(std::string(reinterpret_cast<const char*>(half), 6));
  b.node("Mul", {"graph_input_cast_0", "w"}, {"m"}, "mul");
  b.node("Relu", {"m"}, {"r"}, "relu");
  OnnxBuilder::attr_int(b.node("Cast", {"r"}, {"y"}, "graph_output_cast_0"), "to", onnx::TensorProto::FLOAT);
  OnnxBuilder::attr_int(b.node("Cast", {"x"}, {"graph_input_cast_0"}, "graph_input_cast_0"), "to",
                        onnx::TensorProto::FLOAT16);
  Graph g = load_onnx_bytes(b.bytes(), "fp16.onnx");
  EXPECT_EQ(g.nodes.front().name, "graph_input_cast_0");
  // 0.1 is not a half: it rounds to 0.0999755859375 at the input Cast; -70000 overflows to -inf.
  Tensor x = f32({2, 3}, {0.1f, -1, 65519, 2, 3, -70000});
  Tensor want = f32({2, 3}, {0.0999755859375f * 1.5f, 2, 65504, 3, 0, 0});
  expect_close(model_from_graph(g).run_reference({{"x", x}}), {{"y", want}}, 0, "reference");
  Engine engine(EngineOptions{.threads = 2});
  Session session(engine, model_from_graph(g));
  expect_close(session.run({{"x", x}}), {{"y", want}}, 0, "session");
}

// y = x + w where w is an initializer and also a graph input (an overridable default).
std::string default_model() {
  OnnxBuilder b(13);
  b.input("x", kF32, {2, 3}).input("w", kF32, {3}).output("y", kF32, {2, 3});
  b.initializer_f32("w", {3}, {1, 2, 3});
  b.initializer_f32("two", {}, {2});
  b.node("Mul", {"w", "two"}, {"w2"}, "scale");  // folds to a constant unless w is fed
  b.node("Add", {"x", "w2"}, {"y"}, "add");
  return b.bytes();
}

TEST(ImportGraph, InitializerThatIsAnInputIsADefaultUnlessFed) {
  Graph g = load_onnx_bytes(default_model(), "default.onnx");
  ASSERT_EQ(g.inputs.size(), 1u);
  ASSERT_EQ(g.defaults.size(), 1u);
  EXPECT_EQ(g.defaults[0].name, "w");
  Tensor x = f32({2, 3}, {0, 0, 0, 1, 1, 1});
  Tensor w = f32({3}, {10, 20, 30});
  Tensor want_default = f32({2, 3}, {2, 4, 6, 3, 5, 7});
  Tensor want_fed = f32({2, 3}, {20, 40, 60, 21, 41, 61});

  Model model = model_from_graph(g);
  expect_close(model.run_reference({{"x", x}}), {{"y", want_default}}, 0, "reference, default");
  expect_close(model.run_reference({{"x", x}, {"w", w}}), {{"y", want_fed}}, 0, "reference, fed");
  expect_close(model.run_reference({{"x", x}}), {{"y", want_default}}, 0, "reference, default again");

  Engine engine(EngineOptions{.threads = 1});
  Session session(engine, model_from_graph(g));
  expect_close(session.run({{"x", x}}), {{"y", want_default}}, 0, "session, default");
  expect_close(session.run({{"x", x}, {"w", w}}), {{"y", want_fed}}, 0, "session, fed");
  expect_close(session.submit({{"x", x}, {"w", w}}).get(), {{"y", want_fed}}, 0, "session submit, fed");
  expect_close(session.run({{"x", x}}), {{"y", want_default}}, 0, "session, default again");
  EXPECT_THROW(session.run({{"x", x}, {"w", Tensor::from<int64_t>({3}, std::vector<int64_t>{1, 2, 3})}}), Error);
}

TEST(ImportGraph, MissingOrWrongValueInfoDoesNotMatter) {
  OnnxBuilder b(13);
  b.input("x", kF32, {2, 3}).output("y", kF32, {2, 3});
  b.node("Relu", {"x"}, {"r"}, "relu");
  b.node("Neg", {"r"}, {"y"}, "neg");
  auto* vi = b.proto().mutable_graph()->add_value_info();  // r declared int64 [7]: wrong
  vi->set_name("r");
  vi->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::INT64);
  vi->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(7);
  Model model = model_from_graph(load_onnx_bytes(b.bytes(), "vi.onnx"));
  Tensor x = f32({2, 3}, {-1, 2, -3, 4, -5, 6});
  expect_close(model.run_reference({{"x", x}}), {{"y", f32({2, 3}, {0, -2, 0, -4, 0, -6})}}, 0, "run");
}

// ---- SSA: every value has one definition (ONNX's checker's rule, onnx/checker.cc). Each model
// below was accepted before the check, with the tile runtime and the reference disagreeing on
// which definition wins.

// x + <name>, with <name> an initializer [1, 1].
OnnxBuilder add_model_with(const std::string& name) {
  OnnxBuilder b(13);
  b.input("x", kF32, {2}).output("y", kF32, {2});
  b.initializer_f32(name, {2}, {1, 1});
  b.node("Add", {"x", name}, {"y"}, "add");
  return b;
}

std::string load_error(const std::string& bytes) {
  try {
    load_onnx_bytes(bytes, "ssa.onnx");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ImportSsa, NodeOutputNamedLikeAnInitializerIsAnError) {
  OnnxBuilder b(13);
  b.input("x", kF32, {2}).output("y", kF32, {2});
  b.initializer_f32("w", {2}, {1, 2});
  b.node("Relu", {"x"}, {"w"}, "n1");
  b.node("Add", {"x", "w"}, {"y"}, "add");
  EXPECT_EQ(load_error(b.bytes()),
            "ssa.onnx: value 'w' is defined twice: by node 'n1' (Relu) and as an initializer");
}

TEST(ImportSsa, TwoConstantsOfOneNameIsAnError) {
  OnnxBuilder b(13);
  b.input("x", kF32, {2}).output("y", kF32, {2});
  for (const char* name : {"c1", "c2"}) {
    auto& c = b.node("Constant", {}, {"k"}, name);
    OnnxBuilder::attr_float(c, "value_float", 1);
  }
  b.node("Add", {"x", "k"}, {"y"}, "add");
  EXPECT_EQ(load_error(b.bytes()),
            "ssa.onnx: value 'k' is defined twice: by node 'c2' (Constant) and by node 'c1' (Constant)");
}

TEST(ImportSsa, NodeOutputRepeatingAGraphInputIsAnError) {
  OnnxBuilder b(13);
  b.input("x", kF32, {2}).output("y", kF32, {2});
  b.node("Neg", {"x"}, {"x"}, "again");
  b.node("Relu", {"x"}, {"y"}, "relu");
  EXPECT_EQ(load_error(b.bytes()), "ssa.onnx: value 'x' is defined twice: by node 'again' (Neg) and as a graph input");
}

TEST(ImportSsa, RepeatedGraphInputOrInitializerIsAnError) {
  OnnxBuilder inputs(13);
  inputs.input("x", kF32, {2}).input("x", kF32, {2}).output("y", kF32, {2});
  inputs.node("Relu", {"x"}, {"y"}, "relu");
  EXPECT_EQ(load_error(inputs.bytes()), "ssa.onnx: value 'x' is defined twice: as a graph input and as a graph input");

  OnnxBuilder weights = add_model_with("w");
  weights.initializer_f32("w", {2}, {3, 4});
  EXPECT_EQ(load_error(weights.bytes()),
            "ssa.onnx: value 'w' is defined twice: as an initializer and as an initializer");
}

// An If whose then-branch has a node named `inner` writing `name`; the outer graph defines
// x (input), w (initializer) and xx (node 'outer').
std::string if_defining(const std::string& name, const std::string& branch_input = "") {
  OnnxBuilder b(13);
  b.input("x", kF32, {2}).input("c", onnx::TensorProto::BOOL, {}).output("y", kF32, {2});
  b.initializer_f32("w", {2}, {1, 2});
  b.node("Add", {"x", "w"}, {"xx"}, "outer");
  OnnxBuilder then_b, else_b;
  if (!branch_input.empty()) then_b.input(branch_input, kF32, {2});
  then_b.node("Neg", {"xx"}, {name}, "inner");
  then_b.output(name, kF32, {2});
  else_b.node("Identity", {"xx"}, {"e"}, "same");
  else_b.output("e", kF32, {2});
  auto& node = b.node("If", {"c"}, {"y"}, "choose");
  for (auto [key, body] : {std::pair{"then_branch", &then_b}, std::pair{"else_branch", &else_b}}) {
    auto* a = node.add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::GRAPH);
    *a->mutable_g() = body->proto().graph();
  }
  return b.bytes();
}

TEST(ImportSsa, SubgraphNodeMayNotRedefineAnOuterName) {
  const std::string in_branch = " in subgraph 'then_branch' of node 'choose' (If) and ";
  EXPECT_EQ(load_error(if_defining("x")),
            "ssa.onnx: value 'x' is defined twice: by node 'inner' (Neg)" + in_branch + "as a graph input in the main graph");
  EXPECT_EQ(load_error(if_defining("w")),
            "ssa.onnx: value 'w' is defined twice: by node 'inner' (Neg)" + in_branch + "as an initializer in the main graph");
  EXPECT_EQ(load_error(if_defining("xx")),
            "ssa.onnx: value 'xx' is defined twice: by node 'inner' (Neg)" + in_branch +
                "by node 'outer' (Add) in the main graph");
  // Fresh names load; so does a subgraph input shadowing an outer name, which ONNX allows.
  EXPECT_EQ(load_error(if_defining("t")), "");
  EXPECT_EQ(load_error(if_defining("t", "x")), "");
}

}  // namespace
}  // namespace grove
