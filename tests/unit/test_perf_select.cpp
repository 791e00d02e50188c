// The performance model at plan time (tune/perf_select.h): profile rows become masked samples,
// damaged CSV is an Error naming the line, and the model's choices are ones make_plan accepts
// and that follow what the model was taught.
#include <gtest/gtest.h>

#include <set>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "graph/choice_attrs.h"
#include "plan_test_util.h"
#include "runtime/reference_executor.h"
#include "tune/perf_select.h"

namespace grove {
namespace {

using namespace grove::test;

const char* kHeader =
    "machine,threads,node,batch,cin,cout,in_h,in_w,out_h,out_w,kernel_h,kernel_w,stride_h,stride_w,group,primitive,"
    "extent,tiles,us\n";

std::string write_csv(const std::string& body) {
  const auto path = std::filesystem::temp_directory_path() / ("grove_profile_" + std::to_string(::getpid()) + ".csv");
  std::ofstream(path) << body;
  return path.string();
}

TEST(PerfSelect, RowsOfOneGridBecomeOneMaskedSample) {
  const std::string path = write_csv(std::string(kHeader) +
                                     "\"m, with a comma\",2,\"a\",1,64,64,56,56,56,56,3,3,1,1,1,gemm,1x64x28x56,2,1000\n"
                                     "\"m, with a comma\",2,\"b\",1,64,64,56,56,56,56,3,3,1,1,1,gemm,1x64x28x56,2,900\n"
                                     "\"m, with a comma\",2,\"a\",1,64,64,56,56,56,56,3,3,1,1,1,winograd,1x64x28x56,2,500\n"
                                     "\"m, with a comma\",2,\"a\",1,64,64,56,56,56,56,3,3,1,1,1,gemm,1x32x56x56,2,1500\n");
  const auto rows = tune::read_profile_csv(path);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].machine, "m, with a comma");
  EXPECT_EQ(rows[0].extent, (Shape{1, 64, 28, 56}));
  const auto samples = tune::samples_from_rows(rows);
  ASSERT_EQ(samples.size(), 2u);  // two grids
  int with_both = 0;
  for (const auto& s : samples) {
    ASSERT_EQ(s.times.size(), 2u);
    if (!std::isnan(s.times[1])) {
      ++with_both;
      EXPECT_EQ(s.times[0], 900);  // the faster of a repeated layer's measurements
      EXPECT_EQ(s.times[1], 500);
    } else {
      EXPECT_EQ(s.times[0], 1500);
    }
  }
  EXPECT_EQ(with_both, 1);
  std::filesystem::remove(path);
}

TEST(PerfSelect, DamagedCsvIsAnErrorNamingTheLine) {
  auto refused = [](const std::string& body, const std::string& says) {
    const std::string path = write_csv(body);
    try {
      tune::read_profile_csv(path);
      ADD_FAILURE() << "read " << body;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
    std::filesystem::remove(path);
  };
  refused("a,b\n", "line 1");
  refused(std::string(kHeader) + "m,2,n,1,64\n", "line 2: has 5 fields");
  refused(std::string(kHeader) + "m,2,n,1,64,64,56,56,56,56,3,3,1,1,1,gemm,1x64x28x56,2,-4\n", "not a time");
  refused(std::string(kHeader) + "m,2,n,1,6x4,64,56,56,56,56,3,3,1,1,1,gemm,1x64x28x56,2,4\n", "not a size");
  refused(std::string(kHeader) + "m,2,n,1,64,64,56,56,56,56,3,3,1,1,1,gemm,1xax28x56,2,4\n", "not a tile extent");
}

// x [1,16,32,32] -> a 3x3 conv Winograd and the GEMM can both run.
TestModel one_conv() {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 16, 32, 32}).output("y", kF32, {1, 16, 32, 32});
  weight(b, "w", {16, 16, 3, 3}, 1);
  OnnxBuilder::attr_ints(b.node("Conv", {"x", "w"}, {"y"}, "conv"), "pads", {1, 1, 1, 1});
  return {"one_conv", b.bytes(), {{"x", seeded_tensor({1, 16, 32, 32}, 9)}}};
}

// A model taught that `fast` costs a tenth of the other primitive on every configuration.
tune::PerfModel taught(const std::string& fast) {
  std::vector<tune::PerfSample> samples;
  for (int64_t c : {8, 16, 32, 64})
    for (int64_t h : {8, 16, 32})
      for (int64_t tiles : {1, 2, 4, 8}) {
        tune::ConvConfig cfg{1, c, c, h, h, h, h, 3, 3, 1, 1, 1};
        const double gemm = double(c * c * h * h) / 100.0;
        tune::PerfSample s;
        s.features = tune::conv_features(cfg, {1, c, h / 2, h}, tiles, 2);
        s.times = {fast == "gemm" ? gemm : gemm * 10, fast == "gemm" ? gemm * 10 : gemm};
        samples.push_back(s);
      }
  tune::TrainOptions o;
  o.epochs = 200;
  o.learning_rate = 3e-3;
  return tune::PerfModel::train(samples, o);
}

TEST(PerfSelect, ChoicesFollowTheModelAndFitThePlan) {
  const Graph g = unfused_graph(one_conv());
  PlanOptions po;
  po.threads = 2;
  po.prepare_weights = false;
  const auto rules = make_plan(g, po);
  EXPECT_TRUE(rules->prepared[0] == nullptr);
  for (const std::string fast : {"gemm", "winograd"}) {
    const std::vector<NodeChoice> choices = tune::predicted_choices(*rules, taught(fast));
    PlanOptions with = po;
    with.prepare_weights = true;
    with.choices = choices;
    make_plan(g, with);  // every choice fits
    const std::string rule_primitive = tune::rule_choice(*rules, 0).primitive;
    const std::string chosen = choices.empty() ? rule_primitive : choices[0].primitive.empty() ? rule_primitive : choices[0].primitive;
    EXPECT_EQ(chosen, fast);
  }
}

// x [1,16,32,32] -> conv -> reshape-free MatMul over the last dim with a constant B.
TestModel conv_then_matmul() {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 16, 32, 32}).output("y", kF32, {1, 16, 32, 48});
  weight(b, "w", {16, 16, 3, 3}, 1);
  weight(b, "b", {32, 48}, 2);
  OnnxBuilder::attr_ints(b.node("Conv", {"x", "w"}, {"c"}, "conv"), "pads", {1, 1, 1, 1});
  b.node("MatMul", {"c", "b"}, {"y"}, "matmul");
  return {"conv_then_matmul", b.bytes(), {{"x", seeded_tensor({1, 16, 32, 32}, 9)}}};
}

// Every candidate grove tune may measure is a plan make_plan accepts, and it computes the
// reference's answer on the tile runtime.
TEST(PerfSelect, EveryCandidatePlansAndComputesTheReference) {
  const TestModel m = conv_then_matmul();
  const Graph g = unfused_graph(m);
  const TensorMap want = run_reference(g, m.inputs);
  PlanOptions po;
  po.threads = 2;
  const auto rules = make_plan(g, po);
  ASSERT_TRUE(tune::tunable_conv(*rules, 0));
  ASSERT_TRUE(tune::tunable_matmul(*rules, 1));
  EXPECT_FALSE(tune::tunable_conv(*rules, 1));
  const std::vector<tune::ConvCandidate> conv = tune::conv_candidates(*rules, 0), matmul = tune::matmul_candidates(*rules, 1);
  EXPECT_GE(conv.size(), 8u);    // four primitives, several grids
  EXPECT_GE(matmul.size(), 2u);
  std::set<std::string> primitives;
  for (const auto& c : conv) primitives.insert(c.primitive);
  EXPECT_EQ(primitives, (std::set<std::string>{"gemm", "nhwc", "winograd", "winograd_nhwc"}));
  for (const auto& c : matmul) EXPECT_TRUE(c.primitive.empty());
  uint32_t seed = 1;
  auto check = [&](const NodeChoice& choice, int64_t tiles, size_t) {
    PlanOptions with = po;
    with.choices = {choice};
    const auto plan = make_plan(g, with);
    // By name: an nhwc choice puts Transposes around the conv.
    size_t node = 0;
    while (node < plan->graph.nodes.size() && plan->graph.nodes[node].name != choice.node) ++node;
    ASSERT_LT(node, plan->graph.nodes.size()) << choice.node;
    if (choice.primitive == "nhwc" || choice.primitive == "winograd_nhwc")
      EXPECT_EQ(plan->graph.nodes[node].op_type, "ConvNhwc");
    // The channels-last Winograd runs as the choice says, the channels-last GEMM never on it.
    if (choice.primitive == "nhwc") EXPECT_EQ(conv_primitive_choice(plan->graph.nodes[node]), "nhwc");
    if (choice.primitive == "winograd_nhwc")
      EXPECT_EQ(conv_primitive_choice(plan->graph.nodes[node]), "winograd_nhwc");
    EXPECT_EQ(plan->tiles.tile_count[node], tiles) << choice.node << " " << shape_str(choice.extent);
    PlannedRun run(plan, m.inputs, PlannedRunOptions{true});
    run_serial(run, seed++);
    const float* a = want.at("y").data<float>();
    const float* b = run.outputs().at("y").data<float>();
    double worst = 0;
    for (int64_t i = 0; i < numel(want.at("y").shape()); ++i) worst = std::max(worst, double(std::abs(a[i] - b[i])));
    EXPECT_LT(worst, 1e-3) << choice.node << " " << choice.primitive << " " << shape_str(choice.extent);
  };
  for (const auto& c : conv) check({"conv", c.primitive, c.extent}, c.tiles, 0);
  for (const auto& c : matmul) check({"matmul", "", c.extent}, c.tiles, 1);
}

}  // namespace
}  // namespace grove
