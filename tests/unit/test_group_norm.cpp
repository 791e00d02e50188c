// GroupNormalization (ops/group_norm/): values worked by hand, both opsets' scale and bias
// forms, and one-line errors for bad attributes and shapes. The generated cases
// (generated_cases_rows.cpp) check its tiles; tests/models/contrib_ops_test.py checks it
// against ONNX Runtime.
#include <gtest/gtest.h>

#include <cmath>

#include "op_test_util.h"

namespace grove {
namespace {
using namespace optest;

TEST(GroupNorm, NormalisesEachGroupOfChannels) {
  // 4 channels of 2 values, 2 groups: group 0 holds {1,2,3,4}, group 1 {10,10,10,14}.
  const Tensor x = f32({1, 4, 2}, {1, 2, 3, 4, 10, 10, 10, 14});
  const Node n = NodeBuilder("GroupNormalization", 18, 3).i("num_groups", 2).f("epsilon", 0.0f);
  const Tensor y = run(n, x, f32({2}, {1, 2}), f32({2}, {0, 1}));
  const double s0 = 1 / std::sqrt(1.25), s1 = 1 / std::sqrt(3.0);  // var {1,2,3,4} = 1.25; {10,10,10,14} = 3
  expect_close(y, {1, 4, 2},
               {-1.5 * s0, -0.5 * s0, 0.5 * s0, 1.5 * s0, 2 * -s1 + 1, 2 * -s1 + 1, 2 * -s1 + 1, 2 * 3 * s1 + 1});
}

TEST(GroupNorm, ScaleAndBiasArePerChannelFromOpset21) {
  const Tensor x = f32({1, 2, 2}, {1, 3, 5, 7});
  const Node n = NodeBuilder("GroupNormalization", 21, 3).i("num_groups", 1).f("epsilon", 0.0f);
  const Tensor y = run(n, x, f32({2}, {1, 10}), f32({2}, {0, 100}));
  const double s = 1 / std::sqrt(5.0);  // mean 4, var 5
  expect_close(y, {1, 2, 2}, {-3 * s, -1 * s, 10 * s + 100, 30 * s + 100});
}

TEST(GroupNorm, BadAttributesAndShapesAreOneLineErrors) {
  const Tensor x = f32({1, 4, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  const Tensor two = f32({2}, {1, 1});
  auto error_of = [&](const Node& n, const Tensor& scale) {
    try {
      run(n, x, scale, scale);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of(NodeBuilder("GroupNormalization", 18, 3).i("num_groups", 3), f32({3}, {1, 1, 1})).find("divide"),
            std::string::npos);
  EXPECT_NE(error_of(NodeBuilder("GroupNormalization", 18, 3), two).find("num_groups attribute is required"),
            std::string::npos);
  EXPECT_NE(error_of(NodeBuilder("GroupNormalization", 21, 3).i("num_groups", 2), two).find("must be [4]"),
            std::string::npos);
  EXPECT_NE(error_of(NodeBuilder("GroupNormalization", 18, 3).i("num_groups", 2).i("stash_type", 0), two)
                .find("stash_type"),
            std::string::npos);
}

}  // namespace
}  // namespace grove
