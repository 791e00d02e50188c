#pragma once
// A performance model taught a made-up machine (tune/perf_model.h), and a one-conv model it
// prices: what plan-time selection (test_perf_select.cpp) and a plan on trial
// (test_plan_trial.cpp) are checked against.
#include <functional>
#include <string>
#include <vector>

#include "plan_test_util.h"
#include "tune/perf_model.h"
#include "tune/perf_select.h"

namespace grove {
namespace {

using namespace grove::test;

// x [1,16,32,32] -> a 3x3 conv Winograd and the GEMM can both run.
inline TestModel one_conv() {
  OnnxBuilder b(13);
  b.input("x", kF32, {1, 16, 32, 32}).output("y", kF32, {1, 16, 32, 32});
  weight(b, "w", {16, 16, 3, 3}, 1);
  OnnxBuilder::attr_ints(b.node("Conv", {"x", "w"}, {"y"}, "conv"), "pads", {1, 1, 1, 1});
  return {"one_conv", b.bytes(), {{"x", seeded_tensor({1, 16, 32, 32}, 9)}}};
}

const std::vector<std::string> kPrimitives = {"gemm", "winograd", "nhwc", "winograd_nhwc"};

// A model taught that each primitive of kPrimitives costs factor(cin)[k] times the GEMM's
// time on every configuration.
// One thread and one tile, unless `grids`: then 1 and 2 threads and grids of up to 4 tiles
// cut by rows or channels (a larger training set, for a plan of two threads).
inline tune::PerfModel taught(const std::function<std::vector<double>(int64_t)>& factor,
                       const std::vector<int64_t>& channels = {8, 16, 32, 64}, int64_t kernel = 3, bool grids = false) {
  std::vector<tune::PerfSample> samples;
  const std::vector<int> thread_counts = grids ? std::vector<int>{1, 2} : std::vector<int>{1};
  const std::vector<int64_t> tile_counts = grids ? std::vector<int64_t>{1, 2, 4} : std::vector<int64_t>{1};
  for (int64_t cin : channels)
    for (int64_t cout : channels)
      for (int64_t h : {8, 16, 32})
        for (int threads : thread_counts)
          for (int64_t tiles : tile_counts)
            for (const Shape& extent : grids ? std::vector<Shape>{{1, cout, h / 2, h}, {1, cout / 2, h, h}, {1, cout, h, h}}
                                             : std::vector<Shape>{{1, cout, h, h}}) {
              tune::ConvConfig cfg{1, cin, cout, h, h, h, h, kernel, kernel, 1, 1, 1};
              const double gemm = double(cin * cout * h * h) / 100.0;
              tune::PerfSample s;
              s.features = tune::conv_features(cfg, extent, tiles, threads);
              for (double f : factor(cin)) s.times.push_back(gemm * f);
              samples.push_back(s);
            }
  tune::TrainOptions o;
  o.epochs = 200;
  o.learning_rate = 3e-3;
  tune::PerfModel m = tune::PerfModel::train(samples, o);
  const std::vector<std::string>& all = tune::model_primitives();
  m.set_output_names({all.begin(), all.begin() + static_cast<std::ptrdiff_t>(m.outputs())});
  return m;
}
inline tune::PerfModel taught(const std::vector<double>& factor) {
  return taught([&](int64_t) { return factor; });
}

}  // namespace
}  // namespace grove
