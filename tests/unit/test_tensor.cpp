#include <gtest/gtest.h>

#include <cmath>

#include "passes/bind.h"
#include "graph/tensor.h"

using namespace grove;

TEST(Tensor, ZeroFilledAndTyped) {
  Tensor t(DType::f32, {2, 3});
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.bytes(), 24u);
  for (float v : t.span<float>()) EXPECT_EQ(v, 0.f);
  EXPECT_THROW(t.data<int64_t>(), Error);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u);
}

TEST(Tensor, ReshapeSharesCloneCopies) {
  std::vector<float> v{1, 2, 3, 4};
  Tensor t = Tensor::from<float>({2, 2}, v);
  Tensor r = t.reshaped({4});
  Tensor c = t.clone();
  t.data<float>()[0] = 9;
  EXPECT_EQ(r.data<float>()[0], 9);
  EXPECT_EQ(c.data<float>()[0], 1);
  EXPECT_THROW(t.reshaped({3}), Error);
}

TEST(Tensor, HalfToFloat) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x0000), 0.0f);
  EXPECT_FLOAT_EQ(f16_to_f32(0x0001), 5.9604645e-8f);  // smallest subnormal
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
}

TEST(ShapeBinding, Parses) {
  auto [name, shape] = parse_shape_binding("input=1x3x224x224");
  EXPECT_EQ(name, "input");
  EXPECT_EQ(shape, (Shape{1, 3, 224, 224}));
  EXPECT_EQ(parse_shape_binding("a=5").second, (Shape{5}));
  EXPECT_THROW(parse_shape_binding("a"), Error);
  EXPECT_THROW(parse_shape_binding("a=1xx2"), Error);
  EXPECT_THROW(parse_shape_binding("a=-1"), Error);
}
