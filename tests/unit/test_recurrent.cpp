// LSTM, GRU and RNN references: small cases worked out by hand (the ONNX node tests cover the
// default forms). A linear "Affine" activation makes the recurrence easy to follow:
// h_t = W x_t + R h_(t-1) with W = 2, R = 0.5, x = 1 then 3. Then the tile rule against them.
#include <gtest/gtest.h>

#include <functional>

#include "op_test_util.h"
#include "tiling_test_util.h"

using namespace grove;
using namespace grove::optest;

namespace {

NodeBuilder linear_rnn(const std::string& direction, int64_t layout) {
  NodeBuilder b("RNN", 14, 5, 2);
  b.s("direction", direction).i("layout", layout).i("hidden_size", 1);
  Attribute& acts = fresh_attr(b.node, "activations", Attribute::Kind::strings);
  acts.strings.assign(direction == "bidirectional" ? 2 : 1, "Affine");
  b.floats("activation_alpha", {1, 1}).floats("activation_beta", {0, 0});
  b.node.inputs[3] = "";  // no bias
  return b;
}

}  // namespace

TEST(Recurrent, RnnSequenceLengthsAndDirections) {
  Tensor x = f32({2, 2, 1}, {1, 1, 3, 3});  // [seq, batch, input]: both rows 1 then 3
  Tensor lens = i32({2}, {2, 1});
  Tensor w1 = f32({1, 1, 1}, {2}), r1 = f32({1, 1, 1}, {0.5f});
  // Forward: row 0 gives 2 then 7; row 1 stops after one step, its second output is zero.
  auto fwd = run_all(linear_rnn("forward", 0), {&x, &w1, &r1, nullptr, &lens});
  expect_close(fwd[0], {2, 1, 2, 1}, {2, 2, 7, 0});
  expect_close(fwd[1], {1, 2, 1}, {7, 2});
  // Reverse: row 0 starts at t = 1 (6), then t = 0 (2 + 3 = 5); row 1 at its own last step.
  auto rev = run_all(linear_rnn("reverse", 0), {&x, &w1, &r1, nullptr, &lens});
  expect_close(rev[0], {2, 1, 2, 1}, {5, 2, 6, 0});
  expect_close(rev[1], {1, 2, 1}, {5, 2});
  // Bidirectional, then the same batch-first (layout 1).
  Tensor w2 = f32({2, 1, 1}, {2, 2}), r2 = f32({2, 1, 1}, {0.5f, 0.5f});
  auto bi = run_all(linear_rnn("bidirectional", 0), {&x, &w2, &r2, nullptr, &lens});
  expect_close(bi[0], {2, 2, 2, 1}, {2, 2, 5, 2, 7, 0, 6, 0});
  expect_close(bi[1], {2, 2, 1}, {7, 2, 5, 2});
  Tensor xb = f32({2, 2, 1}, {1, 3, 1, 3});  // [batch, seq, input]
  auto bf = run_all(linear_rnn("bidirectional", 1), {&xb, &w2, &r2, nullptr, &lens});
  expect_close(bf[0], {2, 2, 2, 1}, {2, 5, 7, 6, 2, 2, 0, 0});
  expect_close(bf[1], {2, 2, 1}, {7, 5, 2, 2});
}

TEST(Recurrent, LstmGatesFromBiasAlone) {
  // W = R = 0: every gate is its bias. i = o = f = sigmoid(0) = 0.5, candidate tanh(10) ~ 1:
  // c1 = 0.5, h1 = 0.5 tanh(0.5); c2 = 0.5 c1 + 0.5 = 0.75, h2 = 0.5 tanh(0.75).
  NodeBuilder b("LSTM", 14, 4, 3);
  b.i("hidden_size", 1);
  Tensor x = f32({2, 1, 1}, {1, 1});
  Tensor w = f32({1, 4, 1}, {0, 0, 0, 0}), r = f32({1, 4, 1}, {0, 0, 0, 0});
  Tensor bias = f32({1, 8}, {0, 0, 0, 10, 0, 0, 0, 0});  // Wb: i, o, f, c; then Rb
  auto out = run_all(b, {&x, &w, &r, &bias});
  const double h1 = 0.5 * std::tanh(0.5 * std::tanh(10.0)), c2 = 0.5 * 0.5 * std::tanh(10.0) + 0.5 * std::tanh(10.0);
  expect_close(out[0], {2, 1, 1, 1}, {h1, 0.5 * std::tanh(c2)});
  expect_close(out[2], {1, 1, 1}, {c2});
  // input_forget couples f = 1 - i: the same here, since i = 0.5.
  b.i("input_forget", 1);
  expect_close(run_all(b, {&x, &w, &r, &bias})[2], {1, 1, 1}, {c2});
}

TEST(Recurrent, GruLinearBeforeReset) {
  // W = 0, R = 1 on the candidate row only, Rb(h) = 1, h0 = 1, z = r = sigmoid(0) = 0.5:
  // default: cand = tanh(R (r h) + Rb) = tanh(1.5); linear_before_reset: tanh(r (R h + Rb)) = tanh(1).
  NodeBuilder b("GRU", 14, 6, 2);
  b.i("hidden_size", 1);
  b.node.inputs[4] = "";  // no sequence_lens
  Tensor x = f32({1, 1, 1}, {0});
  Tensor w = f32({1, 3, 1}, {0, 0, 0}), r = f32({1, 3, 1}, {0, 0, 1});
  Tensor bias = f32({1, 6}, {0, 0, 0, 0, 0, 1});
  Tensor h0 = f32({1, 1, 1}, {1});
  expect_close(run_all(b, {&x, &w, &r, &bias, nullptr, &h0})[1], {1, 1, 1}, {0.5 * std::tanh(1.5) + 0.5});
  b.i("linear_before_reset", 1);
  expect_close(run_all(b, {&x, &w, &r, &bias, nullptr, &h0})[1], {1, 1, 1}, {0.5 * std::tanh(1.0) + 0.5});
}

TEST(Recurrent, BadInputsAreErrorsNamingTheNode) {
  NodeBuilder b("LSTM", 14, 3, 1);
  b.i("hidden_size", 2);
  Tensor x = f32({1, 1, 3}, {1, 2, 3});
  Tensor w_bad = f32({1, 4, 3}, std::vector<float>(12, 0.f)), r = f32({1, 8, 2}, std::vector<float>(16, 0.f));
  expect_error([&] { run_all(b, {&x, &w_bad, &r}); }, "node 'n' (LSTM): W has shape 1x4x3, expected 1x8x3");
  Tensor w = f32({1, 8, 3}, std::vector<float>(24, 0.f));
  NodeBuilder c = b;
  Attribute& acts = fresh_attr(c.node, "activations", Attribute::Kind::strings);
  acts.strings = {"Sigmoid", "Cosine", "Tanh"};
  EXPECT_TRUE(expect_error([&] { run_all(c, {&x, &w, &r}); }, "activation 'Cosine'"));
  NodeBuilder d = b;
  d.s("direction", "sideways");
  expect_error([&] { run_all(d, {&x, &w, &r}); }, "direction");
}

// ---- The tile rule (tile_recurrent.cpp) against the reference: every output, with weights
// packed at plan time and per run, on every form the fast path takes and one it leaves.

namespace {

struct RecurrentCase {
  std::string op;
  int64_t seq, batch, input, hidden;
  std::string direction = "forward";
  int64_t layout = 0;
  bool bias = true, initial = true, peepholes = false;
  std::function<void(NodeBuilder&)> attrs = [](NodeBuilder&) {};
  std::vector<int32_t> lens = {};  // empty: no sequence_lens input
};

void expect_fast_path_matches_reference(const RecurrentCase& k) {
  SCOPED_TRACE(k.op + " " + k.direction + " layout " + std::to_string(k.layout));
  const int64_t G = k.op == "LSTM" ? 4 : k.op == "GRU" ? 3 : 1, dirs = k.direction == "bidirectional" ? 2 : 1;
  const size_t inputs = k.op == "LSTM" ? 8 : 6, outputs = k.op == "LSTM" ? 3 : 2;
  NodeBuilder b(k.op, 14, inputs, outputs);
  b.i("hidden_size", k.hidden).s("direction", k.direction).i("layout", k.layout);
  k.attrs(b);
  uint32_t seed = 100;
  auto rnd = [&](Shape s) { return tiletest::random_f32(std::move(s), seed++, -0.6f, 0.6f); };
  const Shape x_shape = k.layout ? Shape{k.batch, k.seq, k.input} : Shape{k.seq, k.batch, k.input};
  const Shape state = k.layout ? Shape{k.batch, dirs, k.hidden} : Shape{dirs, k.batch, k.hidden};
  std::vector<Tensor> t(inputs);
  t[0] = rnd(x_shape);
  t[1] = rnd({dirs, G * k.hidden, k.input});
  t[2] = rnd({dirs, G * k.hidden, k.hidden});
  if (k.bias) t[3] = rnd({dirs, 2 * G * k.hidden});
  if (!k.lens.empty()) t[4] = i32({k.batch}, k.lens);
  if (k.initial) t[5] = rnd(state);
  if (k.initial && k.op == "LSTM") t[6] = rnd(state);
  if (k.peepholes) t[7] = rnd({dirs, 3 * k.hidden});
  std::vector<const Tensor*> in;
  std::vector<ValueInfo> infos;
  for (size_t i = 0; i < inputs; ++i) {
    if (t[i].empty()) b.node.inputs[i] = "";
    in.push_back(t[i].empty() ? nullptr : &t[i]);
    infos.push_back(t[i].empty() ? ValueInfo{DType::undefined, {}, nullptr, false} : ValueInfo{t[i].dtype(), t[i].shape(), &t[i], true});
  }
  const std::vector<Tensor> ref = run_all(b, in);
  const TileRule* rule = find_tile_rule(b);
  ASSERT_NE(rule, nullptr);
  ASSERT_TRUE(rule->every_output);
  for (bool prepare : {false, true}) {
    SCOPED_TRACE(prepare ? "packed at plan time" : "packed per run");
    std::shared_ptr<const void> prepared = prepare ? rule->prepare(b, infos, in) : nullptr;
    if (prepare && k.lens.empty() && !b.node.has_attr("activations")) EXPECT_NE(prepared, nullptr);
    std::vector<Tensor> got;
    for (const Tensor& r : ref) got.emplace_back(r.dtype(), r.shape());
    for (Tensor& g : got) std::fill_n(g.data<float>(), g.numel(), std::nanf(""));
    std::vector<Tensor*> out;
    for (Tensor& g : got) out.push_back(&g);
    TileScratch scratch;
    rule->run_tile(b, in, out, full_region(ref[0].shape()), prepared.get(), scratch);
    for (size_t o = 0; o < ref.size(); ++o) {
      ASSERT_EQ(got[o].shape(), ref[o].shape());
      for (int64_t e = 0; e < ref[o].numel(); ++e)
        ASSERT_NEAR(got[o].data<float>()[e], ref[o].data<float>()[e], 2e-5) << "output " << o << " element " << e;
    }
  }
}

}  // namespace

TEST(Recurrent, TileRuleMatchesTheReferenceOnEveryForm) {
  // Sizes off every vector width and GEMM panel: H = 13 and 37, I = 7 and 70.
  for (const char* op : {"LSTM", "GRU", "RNN"})
    for (const char* direction : {"forward", "reverse", "bidirectional"})
      for (int64_t layout : {0, 1}) expect_fast_path_matches_reference({op, 5, 3, 7, 13, direction, layout});
  expect_fast_path_matches_reference({"LSTM", 3, 1, 70, 37, "forward", 0, false, false});
  expect_fast_path_matches_reference({"LSTM", 4, 2, 9, 11, "bidirectional", 1, true, true, true});
  expect_fast_path_matches_reference(
      {"LSTM", 4, 2, 9, 11, "forward", 0, true, true, true, [](NodeBuilder& b) { b.f("clip", 0.3f).i("input_forget", 1); }});
  expect_fast_path_matches_reference(
      {"GRU", 4, 2, 9, 11, "bidirectional", 0, true, true, false, [](NodeBuilder& b) { b.i("linear_before_reset", 1); }});
  expect_fast_path_matches_reference(
      {"GRU", 4, 2, 9, 11, "forward", 1, false, false, false, [](NodeBuilder& b) { b.i("linear_before_reset", 1).f("clip", 0.2f); }});
  expect_fast_path_matches_reference({"RNN", 6, 2, 9, 37, "forward", 0, true, false, false, [](NodeBuilder& b) { b.f("clip", 0.5f); }});
  // sequence_lens at full length stays fast; a short row goes to the reference.
  expect_fast_path_matches_reference({"GRU", 4, 2, 9, 11, "reverse", 0, true, true, false, [](NodeBuilder&) {}, {4, 4}});
  expect_fast_path_matches_reference({"LSTM", 4, 2, 9, 11, "bidirectional", 0, true, true, true, [](NodeBuilder&) {}, {4, 2}});
  // Activations other than the defaults go to the reference too.
  expect_fast_path_matches_reference({"RNN", 3, 2, 5, 6, "forward", 0, true, true, false, [](NodeBuilder& b) {
                                        fresh_attr(b.node, "activations", Attribute::Kind::strings).strings = {"Relu"};
                                      }});
}

TEST(Recurrent, TileRuleOnlyWithItsFirstOutputNamed) {
  NodeBuilder b("LSTM", 14, 3, 3);
  EXPECT_NE(find_tile_rule(b), nullptr);
  b.node.outputs[0] = "";
  EXPECT_EQ(find_tile_rule(b), nullptr);
}
