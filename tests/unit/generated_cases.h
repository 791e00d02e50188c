#pragma once
// Generated differential cases: one generator per op that has a tile rule draws a node
// (ranks, shapes with 1s, primes and register-tile edges, every attribute the schema has,
// defaults left out, broadcasting, dtypes) and its inputs from a seed. The tests
// (test_generated_ops.cpp) run each case's tiles on many grids and its one-node model on the
// tile runtime at 1, 2 and 3 workers, both schedules and both conv layouts, against the
// reference implementation. A seed always gives the same case, so a failure names the seed
// and writes the case as an .onnx file with its inputs.
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace grove::gen {

struct Case {
  Node node;
  std::vector<Tensor> inputs;  // an empty Tensor is a missing optional input
  // Inputs that are initializers in the one-node model (weights, shapes, axes): the planner
  // prepares and folds only constants, and some shape inputs must be known to plan at all.
  std::vector<bool> constant;
  // Per-element tolerance relative to 1 + |want|; 0: bit-exact with the reference.
  double tol = 0;
};

// Draws from one seeded stream; every choice a generator makes goes through it.
class Draw {
 public:
  explicit Draw(uint32_t seed) : rng_(seed) {}
  int64_t between(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng_); }
  double real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  template <class T>
  const T& pick(const std::vector<T>& options) {
    return options[static_cast<size_t>(between(0, static_cast<int64_t>(options.size()) - 1))];
  }
  // A dim: mostly small, often 1, sometimes a prime or a size beside a vector or register
  // tile's edge (8, 16, 32 floats).
  int64_t dim(int64_t most = 33);
  // `rank` dims whose product stays at most `volume` (dims are shrunk from the back).
  Shape shape(size_t rank, int64_t volume = 1500, int64_t most = 33);
  // Uniform float32 values in [lo, hi).
  Tensor f32(const Shape& shape, double lo = -2, double hi = 2);
  // Integers in [lo, hi] of any integer dtype.
  Tensor ints(DType dtype, const Shape& shape, int64_t lo, int64_t hi);
  Tensor booleans(const Shape& shape);
  uint32_t seed() { return static_cast<uint32_t>(rng_()); }

 private:
  std::mt19937 rng_;
};

// A one-dim int64 tensor (shapes, axes, starts).
Tensor i64s(const std::vector<int64_t>& values);
// A scalar of the dtype holding `v`.
Tensor scalar(DType dtype, double v);
// `out` with dims randomly set to 1 and leading dims dropped: an input that broadcasts to it.
Shape broadcast_from(Draw& d, const Shape& out);

// A node of `op` with inputs in0.. and outputs out0.. (attributes set by the generator).
Node node(const std::string& op, int opset, size_t inputs, size_t outputs = 1, const std::string& domain = "");
void set_attr(Node& n, const std::string& key, int64_t v);
void set_attr(Node& n, const std::string& key, float v);
void set_attr(Node& n, const std::string& key, const std::string& v);
void set_attr(Node& n, const std::string& key, const std::vector<int64_t>& v);
void set_attr(Node& n, const std::string& key, const std::vector<float>& v);

using Generator = Case (*)(Draw& d, const std::string& op);

struct Family {
  std::string name;
  std::vector<std::string> ops;  // rule keys, as tile_rule_keys() spells them
  Generator generate;
};

// Each file of generators adds its families (generated_cases_*.cpp).
void add_elementwise_families(std::vector<Family>& families);
void add_row_and_movement_families(std::vector<Family>& families);
void add_nn_families(std::vector<Family>& families);
void add_quantized_families(std::vector<Family>& families);
void add_fused_families(std::vector<Family>& families);  // the grove.internal ops

std::vector<Family> all_families();

}  // namespace grove::gen
