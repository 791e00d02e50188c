// The kernel paths of the Conv, MatMul and Gemm tile rules (SIMD GEMM with im2col packed per
// tile, B packed once by `prepare` or per tile, the direct depthwise loop) at sizes that hit
// the blocking remainders: k past one k block, rows past one register tile, pixels past one
// packed chunk, columns off the panel width. Each case is checked against the reference with
// poisoned inputs (check_tiling), and every grid must give the same bits as one whole tile,
// with and without prepared weights: the sum behind an output element must not depend on the
// tile it falls in.
#include <array>
#include <bit>
#include <cstring>
#include <random>

#include "graph/node_decisions.h"
#include "kernels/bf16.h"
#include "kernels/gemm.h"
#include "kernels/im2col.h"
#include "ops/conv/tile_conv_winograd.h"
#include "tiling_test_util.h"

namespace grove {
namespace {

using optest::NodeBuilder;
using tiletest::check_tiling;
using tiletest::cuttable_of;
using tiletest::random_f32;

constexpr double kTol = 1e-5;

// Runs every tile of the grid with tile sizes `sizes` (0: the whole dim) into one tensor.
Tensor run_grid(const Node& node, const std::vector<Tensor>& inputs, const std::vector<int64_t>& sizes, bool prepare) {
  std::vector<const Tensor*> in;
  std::vector<ValueInfo> infos;
  for (const Tensor& t : inputs) {  // an empty Tensor is a missing optional input
    in.push_back(t.empty() ? nullptr : &t);
    infos.push_back(t.empty() ? ValueInfo{DType::undefined, {}, nullptr, false} : ValueInfo{t.dtype(), t.shape(), &t, true});
  }
  const std::vector<ValueInfo> out_infos = infer_node(node, infos);
  const TileRule* rule = find_tile_rule(node);
  std::shared_ptr<const void> prepared = prepare && rule->prepare ? rule->prepare(node, infos, in) : nullptr;
  Tensor y(DType::f32, out_infos[0].shape);
  for (float& v : y.span<float>()) v = std::nanf("");
  std::vector<Tensor*> out = {&y};
  TileScratch scratch;
  for (const Region& tile : tiletest::grid(y.shape(), sizes)) rule->run_tile(node, in, out, tile, prepared.get(), scratch);
  return y;
}

// Every grid the rule allows (plus `extra` grids) gives the bits of one whole tile.
void expect_grid_independent(const Node& node, const std::vector<Tensor>& inputs,
                             std::vector<std::vector<int64_t>> extra = {}) {
  const std::vector<int64_t> blocks = cuttable_of(node, inputs);
  const Tensor whole = run_grid(node, inputs, std::vector<int64_t>(blocks.size(), 0), false);
  std::vector<std::vector<int64_t>> grids = tiletest::grids_for(whole.shape(), blocks);
  grids.insert(grids.end(), extra.begin(), extra.end());
  for (const auto& sizes : grids)
    for (bool prepare : {false, true}) {
      const Tensor got = run_grid(node, inputs, sizes, prepare);
      std::string grid_text;
      for (int64_t s : sizes) grid_text += std::to_string(s) + " ";
      EXPECT_EQ(std::memcmp(got.raw(), whole.raw(), whole.bytes()), 0)
          << node.op_type << " grid [ " << grid_text << "] prepared=" << prepare;
    }
}

void check(const Node& node, const std::vector<Tensor>& inputs, std::vector<std::vector<int64_t>> extra = {},
           double tol = kTol) {
  check_tiling(node, inputs, tol);
  expect_grid_independent(node, inputs, std::move(extra));
}

// ---- Conv

TEST(TilingKernels, ConvKPastOneKBlockAndPixelsPastOneChunk) {
  // K = 60 * 3 * 3 = 540 > kc (512); 17 x 19 = 323 pixels > one packed chunk; 20 output
  // channels = a 14-row register tile and a 6-row remainder.
  // The plan's choice keeps this 3x3 stride-1 conv on the im2col GEMM (Winograd by rule).
  check(NodeBuilder("Conv", 11, 3).ints("pads", {1, 1, 1, 1}).primitive(ConvPrimitive::gemm),
        {random_f32({1, 60, 17, 19}, 1), random_f32({20, 60, 3, 3}, 2), random_f32({20}, 3)});
}

TEST(TilingKernels, ConvFewPixelsRunTransposedWithTheSameBits) {
  // 7 x 7 output, 64 channels, K = 540: whole planes and row tiles of 1-3 rows take the
  // transposed form (channels in the panels), 4-row tiles and thin channel tiles the direct
  // one; every grid must still give the bits of one whole tile. 32-channel tiles use the
  // prepared W^T from a column window.
  check(NodeBuilder("Conv", 11, 3).ints("pads", {1, 1, 1, 1}),
        {random_f32({2, 60, 7, 7}, 25), random_f32({64, 60, 3, 3}, 26), random_f32({64}, 27)},
        {{0, 0, 4, 0}, {1, 32, 1, 0}, {0, 32, 0, 0}, {0, 30, 4, 0}});
}

// Winograd F(4x4, 3x3): rows cut at multiples of 4; grids that cut anywhere (the extra ones)
// still give the bits of one whole tile, because blocks sit on a grid anchored at row 0;
// inputs outside `needs` are poisoned, so the whole patches of edge blocks must be named.
// Planes big enough for the Winograd rule (at least 128 GEMM columns, tile_conv_winograd.cpp).
// Winograd's rounding differs from the direct sum: 1e-4 (the kernel tester bounds it more
// tightly against the layer's largest output).
TEST(TilingKernels, ConvWinograd) {
  const Node node = NodeBuilder("Conv", 11, 3).ints("pads", {1, 1, 1, 1});
  const std::vector<Tensor> inputs = {random_f32({2, 20, 45, 43}, 40), random_f32({18, 20, 3, 3}, 41), random_f32({18}, 42)};
  // A region off the 4-row grid (output row 5) reads the patch of its block (rows 4..7): input rows 3..8.
  EXPECT_EQ(tiletest::needs_of(node, inputs, {{0, 1}, {0, 18}, {5, 6}, {0, 43}})[0][2], (Range{3, 9}));
  const std::vector<std::pair<Node, std::vector<Tensor>>> cases = {
      {node, inputs},
      {NodeBuilder("Conv", 11, 2), {random_f32({1, 17, 50, 46}, 43), random_f32({33, 17, 3, 3}, 44)}},
      {NodeBuilder("Conv", 11, 3).ints("pads", {0, 1, 1, 0}),
       {random_f32({1, 8, 48, 47}, 45), random_f32({16, 8, 3, 3}, 46), random_f32({16}, 47)}},
  };
  for (const auto& [n, in] : cases) {
    EXPECT_EQ(cuttable_of(n, in)[2], tiling::kWinogradRows);  // the Winograd path
    check(n, in, {{1, 5, 1, 0}, {0, 7, 3, 0}, {0, 0, 5, 0}, {0, 0, 2, 0}}, 1e-4);
  }
}

TEST(TilingKernels, ConvGroupsStrideTwoDilationTwo) {
  check(NodeBuilder("Conv", 11, 3).i("group", 3).ints("strides", {2, 2}).ints("dilations", {2, 2}).ints("pads", {2, 1, 2, 3}),
        {random_f32({2, 12, 13, 15}, 4), random_f32({9, 4, 3, 3}, 5), random_f32({9}, 6)});
  // Asymmetric kernel, stride only along the width, no bias.
  check(NodeBuilder("Conv", 11, 2).i("group", 2).ints("strides", {1, 2}).ints("pads", {0, 2, 1, 0}),
        {random_f32({1, 6, 7, 33}, 7), random_f32({4, 3, 2, 5}, 8)});
}

TEST(TilingKernels, ConvOneByOne) {
  // Stride 1: B is packed straight from the input planes (37 rows, 323 columns).
  check(NodeBuilder("Conv", 11, 3), {random_f32({1, 37, 17, 19}, 9), random_f32({33, 37, 1, 1}, 10), random_f32({33}, 11)});
  // Stride 2 and padding: through the im2col packer.
  check(NodeBuilder("Conv", 11, 2).ints("strides", {2, 2}), {random_f32({2, 16, 9, 10}, 12), random_f32({5, 16, 1, 1}, 13)});
  check(NodeBuilder("Conv", 11, 2).ints("pads", {1, 0, 0, 1}), {random_f32({1, 3, 4, 5}, 14), random_f32({2, 3, 1, 1}, 15)});
}

TEST(TilingKernels, ConvDepthwise) {
  // Channel multiplier 2, dilation 2.
  check(NodeBuilder("Conv", 11, 3).i("group", 4).ints("pads", {2, 2, 2, 2}).ints("dilations", {2, 2}),
        {random_f32({1, 4, 10, 37}, 16), random_f32({8, 1, 3, 3}, 17), random_f32({8}, 18)});
  // 5x5 stride 2.
  check(NodeBuilder("Conv", 11, 2).i("group", 3).ints("pads", {2, 2, 2, 2}).ints("strides", {2, 2}),
        {random_f32({2, 3, 11, 12}, 19), random_f32({3, 1, 5, 5}, 20)});
  // Rows wider than the kernel's accumulator strip.
  check(NodeBuilder("Conv", 11, 2).i("group", 2).ints("pads", {0, 1, 0, 1}),
        {random_f32({1, 2, 3, 600}, 21), random_f32({2, 1, 1, 3}, 22)});
  // One input channel, no groups: many filters of one plane.
  check(NodeBuilder("Conv", 11, 2).ints("pads", {1, 1, 1, 1}), {random_f32({1, 1, 6, 7}, 23), random_f32({5, 1, 3, 3}, 24)});
}

TEST(TilingKernels, ConvFewInputChannelsRunDirect) {
  // Three input channels (a network's stem): the direct kernel, which packs its input rows 8
  // output rows at a time (here 20 rows, so a row tile may start inside a pack) and its
  // weights in blocks of 4 output channels (10 = two blocks and a remainder).
  check(NodeBuilder("Conv", 11, 3).ints("strides", {2, 2}).ints("pads", {3, 3, 3, 3}),
        {random_f32({2, 3, 40, 37}, 70), random_f32({10, 3, 7, 7}, 71), random_f32({10}, 72)}, {{1, 3, 3, 0}, {0, 8, 5, 0}});
  // One input channel, stride 1 along rows and 3 along columns, asymmetric pads.
  check(NodeBuilder("Conv", 11, 2).ints("strides", {1, 3}).ints("pads", {0, 2, 1, 0}),
        {random_f32({1, 1, 21, 35}, 73), random_f32({6, 1, 3, 5}, 74)});
  // Chosen by the plan for a conv the rule gives the GEMM: 20 input channels, stride 1.
  check(NodeBuilder("Conv", 11, 3).ints("pads", {1, 1, 1, 1}).primitive(ConvPrimitive::direct),
        {random_f32({1, 20, 9, 18}, 75), random_f32({7, 20, 3, 3}, 76), random_f32({7}, 77)}, {{0, 4, 3, 0}});
}

TEST(TilingKernels, ConvOneDimensional) {
  // A filter bank (STFT basis as Silero VAD exports it): one input channel, a 64-tap kernel
  // at stride 32, many output channels; K = 64, few positions (the transposed form).
  check(NodeBuilder("Conv", 11, 2).ints("strides", {32}), {random_f32({1, 1, 352}, 50), random_f32({66, 1, 64}, 51)});
  // Channels in and out, pads, stride 2, dilation 2, two images, bias; K = 129 * 3 past no
  // k block but pixels past one chunk.
  check(NodeBuilder("Conv", 11, 3).ints("pads", {1, 2}).ints("strides", {2}).ints("dilations", {2}),
        {random_f32({2, 129, 700}, 52), random_f32({20, 129, 3}, 53), random_f32({20}, 54)});
  // K past one k block; 1x1 (read in place); grouped with several channels per group.
  check(NodeBuilder("Conv", 11, 2).ints("pads", {2, 2}), {random_f32({1, 110, 9}, 55), random_f32({17, 110, 5}, 56)});
  check(NodeBuilder("Conv", 11, 2), {random_f32({1, 37, 41}, 57), random_f32({33, 37, 1}, 58)});
  check(NodeBuilder("Conv", 11, 2).i("group", 2).ints("pads", {1, 1}), {random_f32({1, 6, 13}, 59), random_f32({4, 3, 3}, 60)});
  // Depthwise 1-D stays on the tap walk.
  check(NodeBuilder("Conv", 11, 2).i("group", 4).ints("pads", {1, 1}), {random_f32({1, 4, 30}, 61), random_f32({4, 1, 3}, 62)});
}

// ---- MatMul and Gemm

TEST(TilingKernels, MatMulConstantAndActivationB) {
  // K = 530 > kc; N = 45 is one full panel and a remainder; 37 rows. The extra grid cuts N
  // on panel boundaries, so prepared panels are used from a column window.
  check(NodeBuilder("MatMul", 13, 2), {random_f32({2, 19, 530}, 30), random_f32({530, 45}, 31)}, {{1, 5, 32}, {0, 0, 32}});
  // Attention-like batches of activations (QK^T and PV shapes), B broadcast over a batch dim.
  check(NodeBuilder("MatMul", 13, 2), {random_f32({2, 3, 17, 40}, 32), random_f32({2, 3, 40, 21}, 33)});
  check(NodeBuilder("MatMul", 13, 2), {random_f32({2, 3, 17, 21}, 34), random_f32({3, 21, 40}, 35)}, {{1, 1, 4, 32}});
  // 1-D operands.
  check(NodeBuilder("MatMul", 13, 2), {random_f32({530}, 36), random_f32({530, 3}, 37)});
  check(NodeBuilder("MatMul", 13, 2), {random_f32({5, 530}, 38), random_f32({530}, 39)});
}

TEST(TilingKernels, GemmConstantBAndBias) {
  // transB with a per-column C: the bias rides in the GEMM's epilogue.
  check(NodeBuilder("Gemm", 13, 3).i("transB", 1),
        {random_f32({37, 530}, 40), random_f32({45, 530}, 41), random_f32({45}, 42)}, {{5, 32}});
  // transA, alpha and a per-row C: scaled after the GEMM.
  check(NodeBuilder("Gemm", 13, 3).i("transA", 1).f("alpha", 0.5f).f("beta", -2.0f),
        {random_f32({530, 19}, 43), random_f32({530, 33}, 44), random_f32({19, 1}, 45)}, {{4, 32}});
}

// ---- bf16 (graph/node_decisions.h): every GEMM path of Conv, MatMul and Gemm with the node
// marked. On inputs that are already bf16 values the packing's rounding changes nothing, so
// the float reference must hold to float accumulation error; on other inputs the bound is
// bf16's, and the result must differ from fp32's (or the mark did nothing). Across grids and
// with or without prepared weights the bits must be those of one whole tile.

std::vector<Tensor> rounded_to_bf16(std::vector<Tensor> inputs) {
  for (Tensor& t : inputs)
    if (!t.empty() && t.dtype() == DType::f32)
      for (float& v : t.span<float>()) v = kernels::bf16_value(kernels::bf16_bits(v));
  return inputs;
}

// With `unit` bf16 (AVX512-BF16) or bf16_amx (AMX tiles).
void check_bf16(const std::string& what, Node node, const std::vector<Tensor>& inputs,
                std::vector<std::vector<int64_t>> extra, NodePrecision unit) {
  const std::vector<int64_t> whole_grid(cuttable_of(node, inputs).size(), 0);
  const Tensor fp32 = run_grid(node, inputs, whole_grid, true);
  node.decisions.precision = unit;
  SCOPED_TRACE(what + " " + node_precision_name(unit));
  check(node, rounded_to_bf16(inputs), std::move(extra), 1e-4);
  check_tiling(node, inputs, 0.1);
  EXPECT_NE(std::memcmp(run_grid(node, inputs, whole_grid, true).raw(), fp32.raw(), fp32.bytes()), 0)
      << "bf16 gave the fp32 bits";
}

// Each bf16 unit; the AMX one is skipped where the CPU has no AMX.
class Bf16Unit : public ::testing::TestWithParam<NodePrecision> {
 protected:
  void SetUp() override {
    const auto p = GetParam() == NodePrecision::bf16_amx ? kernels::Precision::bf16_amx : kernels::Precision::bf16;
    if (!kernels::precision_supported(p, kernels::active_isa()))
      GTEST_SKIP() << "no " << node_precision_name(GetParam()) << " kernels here (or GROVE_ISA lowers the ISA)";
  }
};

INSTANTIATE_TEST_SUITE_P(TilingKernels, Bf16Unit, ::testing::Values(NodePrecision::bf16, NodePrecision::bf16_amx));

TEST_P(Bf16Unit, OnEveryGemmPath) {
  const NodePrecision unit = GetParam();
  auto check_bf16 = [unit](const std::string& what, const Node& node, const std::vector<Tensor>& inputs,
                           std::vector<std::vector<int64_t>> extra = {}) {
    ::grove::check_bf16(what, node, inputs, std::move(extra), unit);
  };
  // 3x3 stride 1 (Winograd in fp32, the im2col GEMM in bf16), K = 540 past one k block.
  check_bf16("3x3", NodeBuilder("Conv", 11, 3).ints("pads", {1, 1, 1, 1}),
             {random_f32({1, 60, 17, 19}, 1), random_f32({20, 60, 3, 3}, 2), random_f32({20}, 3)});
  // Few pixels: the transposed form, from prepared W^T and from a column window.
  check_bf16("transposed", NodeBuilder("Conv", 11, 3).ints("pads", {1, 1, 1, 1}),
             {random_f32({2, 60, 7, 7}, 25), random_f32({64, 60, 3, 3}, 26), random_f32({64}, 27)},
             {{0, 0, 4, 0}, {1, 32, 1, 0}, {0, 32, 0, 0}, {0, 30, 4, 0}});
  // Odd K (37: the last pair half empty), 1x1 read in place, and groups with a stride.
  check_bf16("1x1", NodeBuilder("Conv", 11, 3),
             {random_f32({1, 37, 17, 19}, 9), random_f32({33, 37, 1, 1}, 10), random_f32({33}, 11)});
  check_bf16("groups", NodeBuilder("Conv", 11, 3).i("group", 3).ints("strides", {2, 2}).ints("pads", {2, 1, 2, 3}),
             {random_f32({2, 12, 13, 15}, 4), random_f32({9, 4, 3, 3}, 5), random_f32({9}, 6)});
  // MatMul with K = 531 (odd, past one k block) cut on panel boundaries and off them.
  check_bf16("matmul", NodeBuilder("MatMul", 13, 2), {random_f32({2, 19, 531}, 30), random_f32({531, 45}, 31)},
             {{1, 5, 32}, {0, 0, 32}, {0, 0, 7}});
  check_bf16("gemm", NodeBuilder("Gemm", 13, 3).i("transB", 1),
             {random_f32({37, 530}, 40), random_f32({45, 530}, 41), random_f32({45}, 42)}, {{5, 32}, {5, 7}});
}

// ---- The GEMM's per-row bias (the Conv bias), on every ISA this CPU has

TEST(TilingKernels, GemmRowBiasOnEveryIsa) {
  const size_t m = 17, n = 37, k = 5;
  Tensor a = random_f32({17, 5}, 50), b = random_f32({5, 37}, 51), bias = random_f32({17}, 52), col = random_f32({37}, 53);
  for (kernels::Isa isa : {kernels::Isa::scalar, kernels::Isa::avx2, kernels::Isa::avx512}) {
    if (!kernels::isa_supported(isa)) continue;
    kernels::PackedB packed = kernels::pack_b(b.data<float>(), k, n, n, kernels::BLayout::k_by_n, isa);
    std::vector<float> c(m * n, 0.0f);
    kernels::GemmScratch scratch;
    kernels::GemmCall call;
    call.m = m;
    call.a = a.data<float>();
    call.a_stride = k;
    call.n = n;
    call.c = c.data();
    call.c_stride = n;
    call.epilogue.bias = col.data<float>();
    call.epilogue.row_bias = bias.data<float>();
    call.epilogue.activation.kind = kernels::Activation::relu;
    kernels::gemm(call, packed, scratch);
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) {
        double want = double(bias.data<float>()[i]) + col.data<float>()[j];
        for (size_t p = 0; p < k; ++p) want += double(a.data<float>()[i * k + p]) * b.data<float>()[p * n + j];
        want = std::max(want, 0.0);
        EXPECT_NEAR(c[i * n + j], want, 1e-5) << kernels::isa_name(isa) << " row " << i << " column " << j;
      }
  }
}

// Prepacked A gives the bits of per-call packing, from any tile-aligned first row, across
// k blocks (k = 530) and m blocks (300 rows > mc), on every ISA.
TEST(TilingKernels, GemmPrepackedAMatchesPerCallPacking) {
  const size_t m = 300, n = 45, k = 530;
  Tensor a = random_f32({300, 530}, 60), b = random_f32({530, 45}, 61), bias = random_f32({300}, 62);
  using kernels::Isa;
  using kernels::Precision;
  for (auto [isa, precision] : {std::pair{Isa::scalar, Precision::f32}, std::pair{Isa::avx2, Precision::f32},
                                std::pair{Isa::avx512, Precision::f32}, std::pair{Isa::avx512, Precision::bf16},
                                std::pair{Isa::avx512, Precision::bf16_amx}}) {
    if (!kernels::precision_supported(precision, isa)) continue;
    kernels::PackedB pb = kernels::pack_b(b.data<float>(), k, n, n, kernels::BLayout::k_by_n, isa, precision);
    kernels::PackedA pa = kernels::pack_a(a.data<float>(), m, k, k, isa, precision);
    for (size_t row0 : {size_t{0}, pa.mr, 3 * pa.mr}) {
      std::vector<float> want(m * n, 1.0f), got(m * n, 2.0f);
      kernels::GemmScratch scratch;
      kernels::GemmCall call;
      call.m = m - row0;
      call.a = a.data<float>() + row0 * k;
      call.a_stride = k;
      call.n = n;
      call.c = want.data();
      call.c_stride = n;
      call.epilogue.row_bias = bias.data<float>() + row0;
      kernels::gemm(call, pb, scratch);
      call.a = nullptr;
      call.c = got.data();
      kernels::gemm(call, pa, row0, pb);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), (m - row0) * n * sizeof(float)), 0)
          << kernels::isa_name(isa) << (kernels::is_bf16(precision) ? " bf16" : "")
          << (precision == Precision::bf16_amx ? " amx" : "") << " row0 " << row0;
    }
    kernels::GemmCall bad;
    std::vector<float> c(n);
    bad.m = 1;
    bad.n = n;
    bad.c = c.data();
    bad.c_stride = n;
    EXPECT_THROW(kernels::gemm(bad, pa, 1, pb), Error);   // not on a tile boundary
    EXPECT_THROW(kernels::gemm(bad, pa, m, pb), Error);   // past the end
  }
}

// Every way to get bf16 panels gives the same words: pack_b from either layout, pack_b_into
// into a reused buffer that held other data, and convert_to_bf16 of f32 panels; odd k leaves
// the last pair's high half 0. Mixing precisions in one call is an error.
TEST(TilingKernels, Bf16PackingsAgree) {
  using kernels::Precision;
  const kernels::Isa isa = kernels::Isa::avx512;
  if (!kernels::precision_supported(Precision::bf16, isa)) GTEST_SKIP() << "CPU lacks AVX512-BF16";
  // AMX panels also pad k to whole 32-step tiles with zero pair rows: the reused buffer below
  // held other data there.
  for (Precision prec : {Precision::bf16, Precision::bf16_amx}) {
    if (!kernels::precision_supported(prec, isa)) continue;
    // k past one transposed block (pack_b_into's n_by_k), and rows longer than k.
    for (size_t k : {size_t{1}, size_t{7}, size_t{64}, size_t{131}}) {
      const size_t n = 45, ks = k + 3;
      Tensor b = random_f32({static_cast<int64_t>(k), static_cast<int64_t>(n)}, unsigned(70 + k));
      std::vector<float> b_t(ks * n, 9.0f);
      for (size_t p = 0; p < k; ++p)
        for (size_t j = 0; j < n; ++j) b_t[j * ks + p] = b.data<float>()[p * n + j];
      const kernels::PackedB want = kernels::pack_b(b.data<float>(), k, n, n, kernels::BLayout::k_by_n, isa, prec);
      const kernels::PackedB from_t = kernels::pack_b(b_t.data(), k, n, ks, kernels::BLayout::n_by_k, isa, prec);
      kernels::PackedB into;
      kernels::pack_b_into(into, std::vector<float>(4096, 3.0f).data(), 64, 64, 64, kernels::BLayout::k_by_n, isa);
      kernels::pack_b_into(into, b_t.data(), k, n, ks, kernels::BLayout::n_by_k, isa, prec);
      // And the float panels of the same B, from either layout.
      kernels::PackedB f32_t;
      kernels::pack_b_into(f32_t, b_t.data(), k, n, ks, kernels::BLayout::n_by_k, isa);
      const kernels::PackedB f32_want = kernels::pack_b(b.data<float>(), k, n, n, kernels::BLayout::k_by_n, isa);
      EXPECT_EQ(std::memcmp(f32_t.panels.data(), f32_want.panels.data(), f32_want.panels.size() * sizeof(float)), 0)
          << "f32 k " << k;
      kernels::PackedB converted;
      kernels::convert_to_bf16(kernels::pack_b(b.data<float>(), k, n, n, kernels::BLayout::k_by_n, isa), converted, prec);
      const size_t words = (n + want.nr - 1) / want.nr * want.steps() * want.nr;
      ASSERT_EQ(want.panels.size(), words);
      for (const kernels::PackedB* other : {&from_t, static_cast<const kernels::PackedB*>(&into), static_cast<const kernels::PackedB*>(&converted)}) {
        ASSERT_EQ(other->precision, prec);
        EXPECT_EQ(std::memcmp(other->panels.data(), want.panels.data(), words * sizeof(float)), 0) << "k " << k << (prec == Precision::bf16_amx ? " amx" : "");
      }
      uint32_t first;
      std::memcpy(&first, want.panels.data(), sizeof first);
      EXPECT_EQ(first & 0xFFFFu, kernels::bf16_bits(b.data<float>()[0]));
      EXPECT_EQ(first >> 16, k > 1 ? kernels::bf16_bits(b.data<float>()[n]) : 0u);
    }
  }
  Tensor a = random_f32({20, 8}, 80), b = random_f32({8, 40}, 81);
  const kernels::PackedA pa = kernels::pack_a(a.data<float>(), 20, 8, 8, isa, Precision::bf16);
  const kernels::PackedB pb = kernels::pack_b(b.data<float>(), 8, 40, 40, kernels::BLayout::k_by_n, isa);
  std::vector<float> c(20 * 40);
  kernels::GemmCall call;
  call.m = 20;
  call.n = 40;
  call.c = c.data();
  call.c_stride = 40;
  EXPECT_THROW(kernels::gemm(call, pa, 0, pb), Error);
}

// im2col straight into bf16 panels (a block of pixels at a time) gives the words of f32
// im2col panels converted: blocks that end mid-panel and mid-row, a stride-2 7x7 stem-like
// conv with padding, several blocks, a last panel of few pixels; a reused buffer.
TEST(TilingKernels, Bf16Im2colMatchesConvertedPanels) {
  using kernels::Precision;
  for (Precision prec : {Precision::bf16, Precision::bf16_amx}) {
    if (!kernels::precision_supported(prec, kernels::active_isa())) continue;
    std::vector<float> block(5, 7.0f);
    kernels::PackedB got;
    for (auto [channels, size, kernel, stride, pad] : {std::array<size_t, 5>{3, 40, 7, 2, 3}, std::array<size_t, 5>{5, 13, 3, 1, 1},
                                                       std::array<size_t, 5>{64, 30, 3, 1, 0}}) {
      const size_t out = (size + 2 * pad - kernel) / stride + 1;
      const kernels::Conv2dShape s{.channels = channels, .in_h = size, .in_w = size, .out_h = out, .out_w = out,
                                   .kernel_h = kernel, .kernel_w = kernel, .stride_h = stride, .stride_w = stride,
                                   .pad_top = pad, .pad_left = pad};
      const Tensor x = random_f32({1, int64_t(channels), int64_t(size), int64_t(size)}, unsigned(90 + channels));
      for (auto [q0, n] : {std::pair<size_t, size_t>{0, out * out}, {out + 3, out * 2 + 5}, {7, 1}}) {
        kernels::PackedB f32, want;
        kernels::pack_im2col(f32, x.data<float>(), s, q0, n);
        kernels::convert_to_bf16(f32, want, prec);
        kernels::pack_im2col_bf16(got, x.data<float>(), s, q0, n, prec, block);
        ASSERT_EQ(got.k, want.k);
        ASSERT_EQ(got.n, want.n);
        ASSERT_EQ(got.steps(), want.steps());
        const size_t words = (n + want.nr - 1) / want.nr * want.steps() * want.nr;  // a reused buffer may be longer
        EXPECT_EQ(std::memcmp(got.panels.data(), want.panels.data(), words * sizeof(float)), 0)
            << channels << " channels, pixels " << q0 << " + " << n << (prec == Precision::bf16_amx ? " amx" : "");
      }
    }
  }
}

// bf16_bits rounds to nearest even like vcvtneps2bf16: ties to even, carries into the
// exponent, denormals to zero, NaN stays NaN, infinities stay.
TEST(TilingKernels, Bf16RoundingMatchesTheInstruction) {
  auto bits = [](uint32_t u) { float f; std::memcpy(&f, &u, 4); return kernels::bf16_bits(f); };
  EXPECT_EQ(bits(0x3F808000u), 0x3F80u);  // tie, even stays
  EXPECT_EQ(bits(0x3F818000u), 0x3F82u);  // tie, odd rounds up
  EXPECT_EQ(bits(0x3F808001u), 0x3F81u);
  EXPECT_EQ(bits(0x3FFFFFFFu), 0x4000u);  // carry into the exponent
  EXPECT_EQ(bits(0x00400000u), 0x0000u);  // denormal
  EXPECT_EQ(bits(0x80400000u), 0x8000u);
  EXPECT_EQ(bits(0x7F800000u), 0x7F80u);
  EXPECT_EQ(bits(0x7F800001u) & 0x7F80u, 0x7F80u);
  EXPECT_NE(bits(0x7F800001u) & 0x007Fu, 0u);
  EXPECT_EQ(kernels::bf16_value(0x3F80u), 1.0f);
  if (!kernels::precision_supported(kernels::Precision::bf16, kernels::Isa::avx512)) return;
  std::vector<float> values;
  for (uint32_t u : {0x3F808000u, 0x3F818000u, 0x3FFFFFFFu, 0x00400000u, 0x80400000u, 0x7F800000u, 0xFF800000u})
    values.push_back(std::bit_cast<float>(u));
  std::mt19937 rng(5);
  for (int i = 0; i < 1000; ++i) values.push_back(std::bit_cast<float>(static_cast<uint32_t>(rng()) & 0xBFFFFFFFu));
  std::vector<uint32_t> words(values.size());
  kernels::bf16_interleave_rows_avx512bf16(values.data(), nullptr, values.size(), words.data());
  for (size_t i = 0; i < values.size(); ++i)
    ASSERT_EQ(words[i], kernels::bf16_bits(values[i])) << "value bits " << std::bit_cast<uint32_t>(values[i]);
}

}  // namespace
}  // namespace grove

// ---- Fused epilogues (graph/node_decisions.h): residual input 3 read over the tile's own
// region (poisoned elsewhere), bias and activation; on every conv path and both GEMM rules.

namespace grove {
namespace {

NodeBuilder fused(NodeBuilder b, const char* label, const char* activation, float alpha = 0, float beta = 0) {
  return b.epilogue(label, parse_fused_activation(activation).value(), alpha, beta);
}

TEST(TilingKernels, FusedEpilogueOnEveryConvPath) {
  // Direct and transposed GEMM forms (7x7 planes) with residual + relu.
  check(fused(NodeBuilder("Conv", 11, 4).ints("pads", {1, 1, 1, 1}), "Add+Relu", "relu"),
        {random_f32({2, 60, 7, 7}, 50), random_f32({64, 60, 3, 3}, 51), random_f32({64}, 52), random_f32({2, 64, 7, 7}, 53)},
        {{0, 0, 4, 0}, {1, 32, 1, 0}, {0, 30, 4, 0}});
  check(fused(NodeBuilder("Conv", 11, 4).ints("pads", {1, 1, 1, 1}), "Add+Sigmoid", "sigmoid"),
        {random_f32({1, 20, 17, 19}, 54), random_f32({20, 20, 3, 3}, 55), random_f32({20}, 56), random_f32({1, 20, 17, 19}, 57)});
  // Depthwise with residual and ReLU6; no bias (input 2 missing).
  Node dw = fused(NodeBuilder("Conv", 11, 4).i("group", 4).ints("pads", {1, 1, 1, 1}), "Add+Clip", "clip", 0.0f, 0.3f);
  dw.inputs[2] = "";
  check(dw, {random_f32({1, 4, 10, 37}, 58), random_f32({4, 1, 3, 3}, 59), Tensor(), random_f32({1, 4, 10, 37}, 60)});
  // Few input channels (the direct kernel) with residual and ReLU; no bias.
  Node stem = fused(NodeBuilder("Conv", 11, 4).ints("strides", {2, 2}).ints("pads", {3, 3, 3, 3}), "Add+Relu", "relu");
  stem.inputs[2] = "";
  check(stem, {random_f32({1, 3, 23, 40}, 65), random_f32({6, 3, 7, 7}, 66), Tensor(), random_f32({1, 6, 12, 20}, 67)},
        {{0, 4, 5, 0}});
  // 1-D conv through the taps loop, HardSwish.
  check(fused(NodeBuilder("Conv", 11, 4).ints("pads", {1, 1}), "Add+HardSwish", "hard_swish"),
        {random_f32({2, 6, 15}, 61), random_f32({5, 6, 3}, 62), random_f32({5}, 63), random_f32({2, 5, 15}, 64, -4, 4)});
}

TEST(TilingKernels, FusedEpilogueOnMatMulAndGemm) {
  // Linear: bias [N], residual, erf GELU; N off the panel width, K past one k block.
  check(fused(NodeBuilder("MatMul", 13, 4), "Bias+Add+Gelu", "gelu_erf"),
        {random_f32({2, 19, 530}, 70), random_f32({530, 45}, 71), random_f32({45}, 72), random_f32({2, 19, 45}, 73)},
        {{1, 5, 32}});
  check(fused(NodeBuilder("MatMul", 13, 3), "Bias+LeakyRelu", "leaky_relu", 0.1f),
        {random_f32({3, 17, 40}, 74), random_f32({40, 21}, 75), random_f32({1, 21}, 76)});
  // Gemm with C in the epilogue, and with alpha (the loop after the kernel).
  check(fused(NodeBuilder("Gemm", 13, 4).i("transB", 1), "Add+HardSigmoid", "hard_sigmoid", 0.2f, 0.5f),
        {random_f32({37, 53}, 77), random_f32({45, 53}, 78), random_f32({45}, 79), random_f32({37, 45}, 80)}, {{5, 32}});
  check(fused(NodeBuilder("Gemm", 13, 4).f("alpha", 0.5f).f("beta", 2.0f), "Add+Relu", "relu"),
        {random_f32({9, 13}, 81), random_f32({13, 7}, 82), random_f32({9, 7}, 83), random_f32({9, 7}, 84)});
}

}  // namespace
}  // namespace grove
