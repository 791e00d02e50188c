// The performance model at plan time (tune/perf_select.h): profile rows become masked samples,
// damaged CSV is an Error naming the line, and the model's choices are ones make_plan accepts
// and that follow what the model was taught.
#include <gtest/gtest.h>

#include <set>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <tuple>

#include "graph/node_decisions.h"
#include "plan_test_util.h"
#include "taught_perf_model.h"
#include "runtime/reference_executor.h"
#include "passes/passes.h"
#include "tune/layout_links.h"
#include "tune/layout_model.h"
#include "tune/perf_select.h"
#include "tune/tuned_plan.h"

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
                                     "\"m, with a comma\",2,\"a\",1,64,64,56,56,56,56,3,3,1,1,1,gemm,1x32x56x56,2,1500\n"
                                     "\"m, with a comma\",2,\"a\",1,64,64,56,56,56,56,3,3,1,1,1,nhwc,1x28x56x64,2,700\n"
                                     "\"m, with a comma\",2,\"a\",1,64,64,56,56,56,56,3,3,1,1,1,direct,1x64x28x56,2,800\n"
                                     "\"m, with a comma\",2,\"a\",1,64,64,56,56,56,56,3,3,1,1,1,fft,1x64x28x56,2,100\n");
  const auto rows = tune::read_profile_csv(path);
  ASSERT_EQ(rows.size(), 7u);
  EXPECT_EQ(rows[0].machine, "m, with a comma");
  EXPECT_EQ(rows[0].extent, (Shape{1, 64, 28, 56}));
  // The model's outputs: what the rows measured of what it can price (not a primitive this
  // grove does not have).
  const std::vector<std::string> primitives = tune::measured_primitives(rows);
  EXPECT_EQ(primitives, (std::vector<std::string>{"gemm", "winograd", "nhwc", "direct"}));
  const auto samples = tune::samples_from_rows(rows, primitives);
  ASSERT_EQ(samples.size(), 2u);  // two grids; the channels-last one is the first NCHW grid
  int with_both = 0;
  for (const auto& s : samples) {
    ASSERT_EQ(s.times.size(), 4u);
    if (!std::isnan(s.times[1])) {
      ++with_both;
      EXPECT_EQ(s.times[0], 900);  // the faster of a repeated layer's measurements
      EXPECT_EQ(s.times[1], 500);
      EXPECT_EQ(s.times[2], 700);
      EXPECT_EQ(s.times[3], 800);
    } else {
      EXPECT_EQ(s.times[0], 1500);
      EXPECT_TRUE(std::isnan(s.times[2]));
      EXPECT_TRUE(std::isnan(s.times[3]));
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

// A layout model (tune/layout_model.h) taught that every layout change of a value costs
// `us_per_element` per element, at 1 and 2 threads.
tune::PerfModel taught_layouts(double us_per_element) {
  std::vector<tune::PerfSample> samples;
  for (int64_t c : {8, 16, 32, 64, 128, 256, 512})
    for (int64_t h : {4, 8, 16, 32, 64})
      for (int threads : {1, 2}) {
        const Shape shape = {1, c, h, h};
        tune::PerfSample s;
        s.features = tune::layout_features(shape, threads);
        s.times.assign(tune::layout_changes().size(), us_per_element * double(c * h * h));
        samples.push_back(s);
      }
  tune::TrainOptions o;
  o.epochs = 200;
  o.learning_rate = 3e-3;
  tune::PerfModel m = tune::PerfModel::train(samples, o);
  m.set_output_names(tune::layout_changes());
  return m;
}

PlanOptions options(ConvLayout layout, double transpose_flops = kDefaultTransposeFlops, int threads = 1) {
  PlanOptions po;
  po.threads = threads;
  po.debug.prepare_weights = false;
  po.conv_layout = layout;
  po.machine.transpose_flops = transpose_flops;
  return po;
}

std::shared_ptr<const Plan> structure(const Graph& g, ConvLayout layout) { return make_plan(g, options(layout)); }

// A plan predicted to save less than the least gain asked for keeps the rules (what a model
// shipped from another CPU must clear, tune/tuned_plan.cpp); the share predicted_choices
// reports is what the choices save over the rules' plan.
// The layout model's data: one sample per value and thread count, a time per change measured
// (the others masked); damaged rows are Errors naming the line.
TEST(LayoutModel, RowsOfOneValueBecomeOneMaskedSample) {
  const std::string path = write_csv("machine,threads,change,batch,c,h,w,us\n"
                                     "m,2,nchw_to_nhwc,1,64,14,14,10\n"
                                     "m,2,blocked_to_nhwc,1,64,14,14,30\n"
                                     "m,1,nchw_to_nhwc,1,64,14,14,18\n");
  const auto rows = tune::read_layout_csv(path);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].shape, (Shape{1, 64, 14, 14}));
  const auto samples = tune::layout_samples(rows);
  ASSERT_EQ(samples.size(), 2u);
  const tune::PerfSample& two = samples[0].features.back() > 0 ? samples[0] : samples[1];
  ASSERT_EQ(two.times.size(), 6u);
  EXPECT_EQ(two.times[0], 10);
  EXPECT_EQ(two.times[5], 30);
  EXPECT_TRUE(std::isnan(two.times[1]));
  EXPECT_EQ(tune::layout_change(tune::ValueLayout::channels_last, tune::ValueLayout::blocked), 4);
  EXPECT_EQ(tune::layout_change(tune::ValueLayout::blocked, tune::ValueLayout::blocked), -1);
  for (const std::string& bad : {std::string("m,1,sideways,1,64,14,14,1\n"), std::string("m,1,nchw_to_nhwc,1,0,14,14,1\n"),
                                 std::string("m,1,nchw_to_nhwc,1,64,14,14,-1\n"), std::string("m,1\n")}) {
    const std::string p = write_csv("machine,threads,change,batch,c,h,w,us\n" + bad);
    try {
      tune::read_layout_csv(p);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("line 2"), std::string::npos) << e.what();
    }
  }
}

TEST(PerfSelect, APlanPredictedToSaveLessThanTheLeastGainKeepsTheRules) {
  const Graph g = unfused_graph(one_conv());
  const PlanOptions po = options(ConvLayout::channels_last);
  const std::string rule = tune::rule_choice(*structure(g, ConvLayout::channels_last), 0).primitive;
  // Every primitive but the rule's twice as slow, then all but the rule's a fifth faster.
  std::vector<double> slower(kPrimitives.size(), 2.0), faster(kPrimitives.size(), 0.8);
  for (size_t k = 0; k < kPrimitives.size(); ++k)
    if (kPrimitives[k] == rule) slower[k] = faster[k] = 1.0;
  double gain = -1;
  EXPECT_TRUE(tune::predicted_choices(g, po, taught(slower), 0.03, &gain).empty());
  EXPECT_EQ(gain, 0);
  const tune::PerfModel fast = taught(faster);
  ASSERT_FALSE(tune::predicted_choices(g, po, fast, 0.03, &gain).empty());
  EXPECT_GT(gain, 0.08);
  EXPECT_LT(gain, 0.5);  // a fifth, as the model learned it
  const tune::TuningDecisions trusted = tune::model_choices(g, po, fast, "taught", 0.03);
  EXPECT_FALSE(trusted.choices.empty());
  EXPECT_NE(trusted.source.find("taught ("), std::string::npos) << trusted.source;
  const tune::TuningDecisions doubted = tune::model_choices(g, po, fast, "taught", 0.5);
  EXPECT_TRUE(doubted.choices.empty());
  EXPECT_NE(doubted.source.find("the rules' plan"), std::string::npos) << doubted.source;
  EXPECT_NE(doubted.source.find("under the 50%"), std::string::npos) << doubted.source;
}

TEST(PerfSelect, ChoicesFollowTheModelAndFitThePlan) {
  const Graph g = unfused_graph(one_conv());
  const auto rules = structure(g, ConvLayout::channels_last), as_written = structure(g, ConvLayout::nchw);
  EXPECT_TRUE(rules->prepared[0] == nullptr);
  // What the rules run, and which primitives a candidate with the rule's tile count offers.
  size_t r = 0;
  while (rules->graph.nodes[r].name != "conv") ++r;
  const Node& ruled = rules->graph.nodes[r];
  const bool rule_nhwc = ruled.op_type == "ConvNhwc";
  const std::string rule_primitive = tune::rule_choice(*rules, r).primitive;
  EXPECT_EQ(rule_nhwc, rule_primitive == "nhwc" || rule_primitive == "winograd_nhwc") << rule_primitive;
  std::set<std::string> offered = {rule_primitive};
  for (const auto& k : tune::conv_candidates(*as_written, 0))
    if (k.tiles == tune::rule_choice(*rules, r).tiles) offered.insert(k.primitive);
  EXPECT_GE(offered.size(), 2u);
  for (size_t fast = 0; fast < kPrimitives.size(); ++fast) {
    if (!offered.count(kPrimitives[fast])) continue;  // no candidate to pick
    std::vector<double> factor(kPrimitives.size(), 10.0);
    factor[fast] = 1;
    const std::vector<NodeChoice> choices = tune::predicted_choices(g, options(ConvLayout::channels_last), taught(factor));
    PlanOptions with;
    with.choices = choices;
    const auto plan = make_plan(g, with);  // every choice fits
    ASSERT_LE(choices.size(), 1u);
    // What the plan runs: the choice, or the rule (the one conv keeps its name).
    size_t node = 0;
    while (node < plan->graph.nodes.size() && plan->graph.nodes[node].name != "conv") ++node;
    ASSERT_LT(node, plan->graph.nodes.size());
    const Node& conv = plan->graph.nodes[node];
    const bool nhwc = conv.op_type == "ConvNhwc";
    const bool winograd = nhwc ? conv_primitive_choice(conv) == ConvPrimitive::winograd || conv_primitive_choice(conv) == ConvPrimitive::winograd_nhwc
                               : tune::rule_choice(*plan, node).primitive == "winograd";
    const std::string runs = nhwc ? (winograd ? "winograd_nhwc" : "nhwc") : (winograd ? "winograd" : "gemm");
    EXPECT_EQ(runs, kPrimitives[fast]) << (choices.empty() ? "the rule" : choices[0].primitive);
  }
}

// x -> conv a (128 -> 256 channels) -> conv b (256 -> 128) -> conv c (128 -> 128) -> y, 1x1 on
// 16x16.
Graph chain_of_three_convs() {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 128, 16, 16}).output("y", kF32, {1, 128, 16, 16});
  const char* names[] = {"a", "b", "c"};
  const int64_t channels[] = {128, 256, 128, 128};
  std::string in = "x";
  for (int i = 0; i < 3; ++i) {
    const std::string w = std::string("w") + names[i], out = i == 2 ? "y" : std::string("v") + names[i];
    weight(b, w, {channels[i + 1], channels[i], 1, 1}, i + 1);
    b.node("Conv", {in, w}, {out}, names[i]);
    in = out;
  }
  return unfused_graph({"chain", b.bytes(), {}});
}

// chain_of_three_convs: the rules run the chain channels-last. The model says that the
// channels-last GEMM takes 0.8 of the NCHW GEMM's time on 128 input channels, and that the NCHW GEMM takes 0.85
// of the other's on 256. Where Transposes cost nothing, b goes NCHW alone; at the default
// price (a fifth of b's time) its gain does not pay for the two Transposes around it.
TEST(PerfSelect, LayoutChangesArePricedOnTheEdges) {
  const Graph g = chain_of_three_convs();
  const tune::PerfModel model = taught(
      [](int64_t cin) {
        return cin == 256 ? std::vector<double>{0.85, 1.0, 1.0, 1.0} : std::vector<double>{1.0, 1.0, 0.8, 1.0};
      },
      {32, 64, 128, 256}, 1);
  auto layouts_chosen = [&](const PlanOptions& po, const tune::PerfModel& m) {
    PlanOptions with = po;
    with.choices = tune::predicted_choices(g, po, m);
    const auto chosen = make_plan(g, with);
    std::string layouts;  // what the plan with the model's choices runs: n NCHW, c channels-last
    for (const Node& n : chosen->graph.nodes)
      if (n.op_type.starts_with("Conv")) layouts += n.op_type == "ConvNhwc" ? 'c' : 'n';
    return layouts;
  };
  for (double transpose_flops : {0.0, kDefaultTransposeFlops}) {
    const PlanOptions po = options(ConvLayout::channels_last, transpose_flops);
    const auto rules = make_plan(g, po);
    for (const Node& n : rules->graph.nodes)
      if (n.op_type.starts_with("Conv")) EXPECT_EQ(n.op_type, "ConvNhwc") << n.name << ": the rules run it so";
    const std::string layouts = layouts_chosen(po, model);
    if (transpose_flops == 0) EXPECT_EQ(layouts, "cnc");
    else EXPECT_NE(layouts, "cnc") << "b's gain pays for the Transposes around it";
  }
  // Past one thread the model keeps each conv in the rule's layout.
  EXPECT_EQ(layouts_chosen(options(ConvLayout::channels_last, 0, 2), model), "ccc");
  // A model whose predictions are a fifth off either way cannot tell b's 15%: nothing changes.
  tune::PerfModel unsure = model;
  unsure.set_output_errors({0.2, 0.2, 0.2, 0.2});
  EXPECT_TRUE(tune::predicted_choices(g, options(ConvLayout::channels_last, 0), unsure).empty());
}

// The chain of LayoutChangesArePricedOnTheEdges with a model that prices the channel-blocked
// conv ("nchwc", the seventh output). Blocked at half the GEMM's time everywhere, the whole
// chain goes blocked: its Transposes in and out are the channels-last chain's. With the NCHW
// GEMM at twice the channels-last one's time and blocked at 0.7x on b's 256 input channels and
// 1.3x elsewhere, b alone goes blocked, also at the default price: channels-last and blocked
// meet directly, one Transpose on each side of b (three sixteenths of b's time) for its gain
// of three tenths; two on each side (three eighths) would not have paid. Where Transposes cost
// ten times more, b stays.
TEST(PerfSelect, AModelThatPricesTheBlockedConvRunsChainsBlocked) {
  const Graph g = chain_of_three_convs();
  auto layouts_chosen = [&](const PlanOptions& po, const tune::PerfModel& m) {
    PlanOptions with = po;
    with.choices = tune::predicted_choices(g, po, m);
    const auto chosen = make_plan(g, with);
    std::string layouts;  // n NCHW, c channels-last, b blocked
    for (const Node& n : chosen->graph.nodes)
      if (n.op_type.starts_with("Conv")) layouts += n.op_type == "ConvNhwc" ? 'c' : n.op_type == "ConvNchwc" ? 'b' : 'n';
    return layouts;
  };
  // gemm, winograd, nhwc, winograd_nhwc, direct, winograd_f2x3_nhwc, nchwc
  const tune::PerfModel half = taught([](int64_t) { return std::vector<double>{1, 1, 1, 1, 1, 1, 0.5}; }, {32, 64, 128, 256}, 1);
  EXPECT_EQ(layouts_chosen(options(ConvLayout::channels_last), half), "bbb");
  const tune::PerfModel only_b = taught(
      [](int64_t cin) {
        return std::vector<double>{2, 2, 1, 1, 1, 1, cin == 256 ? 0.7 : 1.3};
      },
      {32, 64, 128, 256}, 1);
  EXPECT_EQ(layouts_chosen(options(ConvLayout::channels_last, 0), only_b), "cbc");
  EXPECT_EQ(layouts_chosen(options(ConvLayout::channels_last), only_b), "cbc");
  EXPECT_EQ(layouts_chosen(options(ConvLayout::channels_last, 10 * kDefaultTransposeFlops), only_b), "ccc");
  // Past one thread the model keeps each conv in the rule's layout, blocked is no exception.
  EXPECT_EQ(layouts_chosen(options(ConvLayout::channels_last, 0, 2), half), "ccc");
  // Unless a layout model prices the changes: nearly free, the chain goes blocked at 2 threads
  // too; at a thousand times the convs' time, the chain runs NCHW throughout, without the
  // changes at its ends that the rules' channels-last chain has.
  const tune::PerfModel half_on_grids =
      taught([](int64_t) { return std::vector<double>{1, 1, 1, 1, 1, 1, 0.5}; }, {32, 64, 128, 256}, 1, true);
  auto with_layouts = [&](const PlanOptions& po, double us_per_element) {
    const tune::PerfModel layouts = taught_layouts(us_per_element);
    PlanOptions with = po;
    with.choices = tune::predicted_choices(g, po, half_on_grids, 0.03, nullptr, &layouts);
    std::string chosen;
    const auto plan = make_plan(g, with);  // held: a temporary's member would not outlive the loop's start
    for (const Node& n : plan->graph.nodes)
      if (n.op_type.starts_with("Conv")) chosen += n.op_type == "ConvNhwc" ? 'c' : n.op_type == "ConvNchwc" ? 'b' : 'n';
    return chosen;
  };
  EXPECT_EQ(with_layouts(options(ConvLayout::channels_last, 0, 2), 1e-6), "bbb");
  EXPECT_EQ(with_layouts(options(ConvLayout::channels_last, 0, 2), 1e3), "nnn");
}

// A network's stem (3 channels, 7x7 stride 2) that the rules run on the direct kernel: a model
// that prices the direct kernel moves it to the GEMM where it says the GEMM is faster by more
// than its margin, and keeps it where the direct kernel is faster.
TEST(PerfSelect, AModelThatPricesTheDirectKernelChoosesForStems) {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 3, 64, 64}).output("y", kF32, {1, 16, 32, 32});
  weight(b, "w", {16, 3, 7, 7}, 1);
  auto& conv = b.node("Conv", {"x", "w"}, {"y"}, "stem");
  OnnxBuilder::attr_ints(conv, "pads", {3, 3, 3, 3});
  OnnxBuilder::attr_ints(conv, "strides", {2, 2});
  const Graph g = unfused_graph({"stem", b.bytes(), {}});
  const PlanOptions po = options(ConvLayout::nchw);
  const auto rules = make_plan(g, po);
  size_t n = 0;
  while (rules->graph.nodes[n].name != "stem") ++n;
  ASSERT_EQ(tune::rule_choice(*rules, n).primitive, "direct");
  const std::vector<int64_t> channels = {3, 8, 16, 32};
  // gemm, winograd, nhwc, winograd_nhwc, direct
  const tune::PerfModel slow_direct = taught([](int64_t) { return std::vector<double>{1, 1, 1, 1, 4}; }, channels, 7);
  const std::vector<NodeChoice> moved = tune::predicted_choices(g, po, slow_direct);
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0].node, "stem");
  EXPECT_EQ(moved[0].primitive, "gemm");
  const tune::PerfModel fast_direct = taught([](int64_t) { return std::vector<double>{4, 4, 4, 4, 1}; }, channels, 7);
  EXPECT_TRUE(tune::predicted_choices(g, po, fast_direct).empty());
  // A model that does not price the direct kernel leaves the stem as the rules run it.
  EXPECT_TRUE(tune::predicted_choices(g, po, taught({1.0, 1.0, 1.0, 1.0})).empty());
}

// A stem on one input channel (a grey image) is priced too: unpriced, it kept no layout of its
// own in the choice, and a neighbour chosen channel-blocked sent it back to NCHW and its
// direct loop after the choice was made (the Fashion-MNIST sub-net w25 ran 0.6x with the
// shipped model's choices, Zen 5). A depthwise conv (one channel per group) stays unpriced.
TEST(PerfSelect, AOneChannelStemIsPricedWithItsNeighbours) {
  OnnxBuilder b(13);
  b.input("x", kF32, {8, 1, 28, 28}).output("y", kF32, {8, 16, 14, 14}).output("d", kF32, {8, 32, 28, 28});
  weight(b, "w0", {32, 1, 3, 3}, 1);
  weight(b, "w1", {16, 32, 3, 3}, 2);
  weight(b, "wd", {32, 1, 3, 3}, 3);
  OnnxBuilder::attr_ints(b.node("Conv", {"x", "w0"}, {"a"}, "stem"), "pads", {1, 1, 1, 1});
  auto& next = b.node("Conv", {"a", "w1"}, {"y"}, "next");
  OnnxBuilder::attr_ints(next, "pads", {1, 1, 1, 1});
  OnnxBuilder::attr_ints(next, "strides", {2, 2});
  auto& dw = b.node("Conv", {"a", "wd"}, {"d"}, "depthwise");
  OnnxBuilder::attr_ints(dw, "pads", {1, 1, 1, 1});
  OnnxBuilder::attr_int(dw, "group", 32);
  const Graph g = unfused_graph({"grey_stem", b.bytes(), {}});
  const auto as_written = make_plan(g, options(ConvLayout::nchw));
  for (size_t n = 0; n < as_written->graph.nodes.size(); ++n) {
    const std::string& name = as_written->graph.nodes[n].name;
    if (name == "depthwise") EXPECT_FALSE(tune::tunable_conv(*as_written, n));
    if (name != "stem") continue;
    ASSERT_TRUE(tune::tunable_conv(*as_written, n));
    std::set<std::string> offered;
    for (const auto& k : tune::conv_candidates(*as_written, n)) offered.insert(k.primitive);
    EXPECT_TRUE(offered.count("direct") && offered.count("nhwc") && offered.count("gemm"));
  }
}

TEST(PerfSelect, AModelSaysWhatItPrices) {
  tune::PerfModel m = taught({1.0, 2.0, 3.0, 4.0});
  EXPECT_EQ(tune::priced_primitives(m), kPrimitives);
  const tune::PerfModel loaded = tune::PerfModel::load(m.save());
  EXPECT_EQ(loaded.output_names(), kPrimitives);
  EXPECT_EQ(loaded.output_errors(), std::vector<double>(4, 0.0));  // unknown
  m.set_output_errors({0.1, 0.25, 0.125, 0.0});
  EXPECT_EQ(tune::PerfModel::load(m.save()).output_errors(), (std::vector<double>{0.1, 0.25, 0.125, 0.0}));
  EXPECT_THROW(m.set_output_errors({0.1}), Error);
  EXPECT_THROW(m.set_output_errors({0.1, -1, 0, 0}), Error);
  EXPECT_THROW(m.set_output_names({"gemm"}), Error);
  EXPECT_THROW(m.set_output_names({"gemm", "win ograd", "nhwc", "x"}), Error);
  // A version 1 file named nothing; it priced the GEMM and Winograd.
  std::string v1 = m.save();
  v1.replace(v1.find("grove-perf-model 2"), 18, "grove-perf-model 1");
  for (const char* line : {"names", "errors"}) v1.erase(v1.find(line), v1.find('\n', v1.find(line)) - v1.find(line) + 1);
  const tune::PerfModel old = tune::PerfModel::load(v1);
  EXPECT_TRUE(old.output_names().empty());
  EXPECT_THROW(tune::priced_primitives(old), Error);  // four outputs: which four?
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
  EXPECT_GE(conv.size(), 12u);   // six primitives, several grids
  EXPECT_GE(matmul.size(), 2u);
  std::set<std::string> primitives;
  for (const auto& c : conv) primitives.insert(c.primitive);
  EXPECT_EQ(primitives,
            (std::set<std::string>{"gemm", "nhwc", "nchwc", "winograd", "winograd_nhwc", "winograd_f2x3_nhwc"}));
  for (const auto& c : matmul) EXPECT_TRUE(c.primitive.empty());
  uint32_t seed = 1;
  auto check = [&](const NodeChoice& choice, int64_t tiles, size_t) {
    PlanOptions with = po;
    with.choices = {choice};
    const auto plan = make_plan(g, with);
    // By name: an nhwc or nchwc choice puts Transposes around the conv.
    size_t node = 0;
    while (node < plan->graph.nodes.size() && plan->graph.nodes[node].name != choice.node) ++node;
    ASSERT_LT(node, plan->graph.nodes.size()) << choice.node;
    const ConvPrimitive chosen = parse_conv_primitive(choice.primitive).value();
    if (channels_last_choice(chosen)) EXPECT_EQ(plan->graph.nodes[node].op_type, "ConvNhwc");
    if (choice.primitive == "nchwc") EXPECT_EQ(plan->graph.nodes[node].op_type, "ConvNchwc");
    // The channels-last Winograd forms run as the choice says, the channels-last GEMM never on
    // either.
    if (channels_last_choice(chosen)) EXPECT_EQ(conv_primitive_choice(plan->graph.nodes[node]), chosen);
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

namespace grove {
namespace {

using namespace grove::test;

// image -> stem (3 channels) -> MaxPool -> a, b; Add(a, b) -> c -> Relu -> y; a -> d -> z. The
// stem reads the image as it is; a and b read the stem through the pool, c reads both through
// the Add (links that are not straight: no blocked value crosses them), d reads a straight;
// c's output goes to a Relu that stays NCHW, d's is a graph output.
// x -> stem (16 -> 64 channels) -> two 3x3 convs of 4 groups feeding each other (a DCCNN
// chain of 4 paths) -> y, on 32x32.
Graph chain_of_paths() {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 16, 32, 32}).output("y", kF32, {1, 64, 32, 32});
  weight(b, "w0", {64, 16, 3, 3}, 1);
  weight(b, "w1", {64, 16, 3, 3}, 2);
  weight(b, "w2", {64, 16, 3, 3}, 3);
  const std::tuple<const char*, const char*, const char*, int64_t> convs[] = {
      {"x", "w0", "a", 1}, {"a", "w1", "b", 4}, {"b", "w2", "y", 4}};
  for (const auto& [x, w, y, groups] : convs) {
    auto& conv = b.node("Conv", {x, w}, {y}, std::string("conv_") + y);
    OnnxBuilder::attr_ints(conv, "pads", {1, 1, 1, 1});
    OnnxBuilder::attr_int(conv, "group", groups);
  }
  return unfused_graph({"paths", b.bytes(), {}});
}

// A chain of paths planned with a core per path keeps its paths apart whatever the model
// prefers: every grid offered for its convs cuts the paths apart and keeps each tile within
// one, and the plan the model's choices make gives every tile of the second grouped conv one
// parent, its own path's tile. With fewer cores than paths the chain is no chain, and grids
// across paths stay on offer.
TEST(PerfSelect, ChoicesForAChainOfPathsKeepThePathsApart) {
  const Graph g = chain_of_paths();
  PlanOptions four = options(ConvLayout::nchw, kDefaultTransposeFlops, 4);
  const auto rules = make_plan(g, four);
  size_t chained = 0;
  for (size_t n = 0; n < rules->graph.nodes.size(); ++n) {
    if (!tune::tunable_conv(*rules, n) || rules->path_chain[n] == 0) continue;
    ++chained;
    EXPECT_EQ(rules->path_chain[n], 4);
    const std::vector<tune::ConvCandidate> offered = tune::conv_candidates(*rules, n);
    EXPECT_FALSE(offered.empty());
    for (const auto& c : offered) {
      const Shape e = tune::nchw_extent(c.primitive, c.extent);
      EXPECT_TRUE(e[1] < 64 && (16 % e[1] == 0 || e[1] % 16 == 0)) << c.primitive << " " << shape_str(c.extent);
    }
  }
  EXPECT_EQ(chained, 2u);
  // A model that finds rows-first grids 10x cheaper than channel cuts still keeps the paths.
  std::vector<tune::PerfSample> samples;
  for (int64_t h : {16, 32, 64})
    for (int threads : {1, 2, 4})
      for (const Shape& extent : {Shape{1, 64, h / 4, h}, Shape{1, 16, h, h}, Shape{1, 64, h, h}}) {
        tune::PerfSample s;
        s.features = tune::conv_features({1, 64, 64, h, h, h, h, 3, 3, 1, 1, 4}, extent, 4, threads);
        s.times = {extent[1] < 64 ? 10.0 : 1.0};
        samples.push_back(s);
      }
  tune::TrainOptions o;
  o.epochs = 200;
  o.learning_rate = 3e-3;
  tune::PerfModel rows = tune::PerfModel::train(samples, o);
  rows.set_output_names({"gemm"});
  PlanOptions with = four;
  with.choices = tune::predicted_choices(g, four, rows);
  const auto plan = make_plan(g, with);
  size_t second = 0;
  for (size_t n = 0; n < plan->graph.nodes.size(); ++n)
    if (plan->graph.nodes[n].name == "conv_y") second = n;
  const TileGraph& tg = plan->tiles;
  EXPECT_GT(tg.tile_count[second], 1);
  for (int32_t t = tg.first_tile[second]; t < tg.first_tile[second] + tg.tile_count[second]; ++t)
    EXPECT_EQ(tg.n_parents[t], 1) << "tile " << t << " of " << shape_str(plan->tile_extent[second]);
  const auto two = make_plan(g, options(ConvLayout::nchw, kDefaultTransposeFlops, 2));
  bool across = false;
  for (size_t n = 0; n < two->graph.nodes.size(); ++n)
    if (tune::tunable_conv(*two, n) && two->graph.nodes[n].attr_int("group", 1) == 4)
      for (const auto& c : tune::conv_candidates(*two, n)) across = across || c.extent[1] == 64;
  EXPECT_TRUE(across);
}

TEST(LayoutLinks, ConvsMeetThroughFollowersAndPayAtNchwBoundaries) {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 3, 32, 32}).output("y", kF32, {1, 16, 16, 16}).output("z", kF32, {1, 16, 16, 16});
  weight(b, "ws", {16, 3, 3, 3}, 1);
  weight(b, "wd", {16, 16, 1, 1}, 5);
  weight(b, "wa", {16, 16, 1, 1}, 2);
  weight(b, "wb", {16, 16, 1, 1}, 3);
  weight(b, "wc", {16, 16, 1, 1}, 4);
  OnnxBuilder::attr_ints(b.node("Conv", {"x", "ws"}, {"s"}, "stem"), "pads", {1, 1, 1, 1});
  auto& pool = b.node("MaxPool", {"s"}, {"p"}, "pool");
  OnnxBuilder::attr_ints(pool, "kernel_shape", {2, 2});
  OnnxBuilder::attr_ints(pool, "strides", {2, 2});
  b.node("Conv", {"p", "wa"}, {"a"}, "a");
  b.node("Conv", {"p", "wb"}, {"bb"}, "b");
  b.node("Add", {"a", "bb"}, {"sum"}, "add");
  b.node("Conv", {"sum", "wc"}, {"c"}, "c");
  b.node("Relu", {"c"}, {"y"}, "relu");
  b.node("Conv", {"a", "wd"}, {"z"}, "d");
  Plan plan;
  plan.graph = unfused_graph({"links", b.bytes(), {}});
  std::vector<bool> is_conv(plan.graph.nodes.size());
  std::map<std::string, size_t> at;
  for (size_t n = 0; n < plan.graph.nodes.size(); ++n) {
    at[plan.graph.nodes[n].name] = n;
    is_conv[n] = plan.graph.nodes[n].op_type == "Conv";
  }
  const tune::LayoutLinks l = tune::layout_links(plan, is_conv);
  std::set<std::tuple<size_t, size_t, int64_t, bool>> links;
  for (const auto& k : l.links) links.insert({k.producer, k.consumer, k.elements, k.straight});
  const int64_t half = 16 * 16 * 16;
  EXPECT_EQ(links, (std::set<std::tuple<size_t, size_t, int64_t, bool>>{{at["stem"], at["a"], half, false},
                                                                        {at["stem"], at["b"], half, false},
                                                                        {at["a"], at["c"], half, false},
                                                                        {at["b"], at["c"], half, false},
                                                                        {at["a"], at["d"], half, true}}));
  std::map<size_t, int64_t> boundaries;
  for (const auto& k : l.boundaries) boundaries[k.conv] = k.elements;
  // The stem's image needs no Transpose (the row kernel gathers its few channels), but its
  // output does where its readers stay NCHW: here none does. c's output goes to the Relu.
  std::map<size_t, int64_t> want = {{at["c"], half}, {at["d"], half}};
  if (!is_few_channel_stem(plan.graph, plan.graph.nodes[at["stem"]])) want[at["stem"]] = 3 * 32 * 32;
  EXPECT_EQ(boundaries, want);
}

}  // namespace
}  // namespace grove
