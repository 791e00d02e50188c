#include "quantize/calibrate.h"

#include <algorithm>
#include <cmath>

#include "graph/error.h"
#include "runtime/session.h"

namespace grove::quantize {

void AbsHistogram::add(const float* values, size_t count) {
  float largest = 0;
  for (size_t i = 0; i < count; ++i)
    if (std::isfinite(values[i])) largest = std::max(largest, std::fabs(values[i]));
  if (largest > top_) {
    if (top_ == 0) {
      top_ = largest;
    } else {
      // Double the range until it holds `largest`, merging bin pairs each time.
      while (top_ < largest) {
        std::vector<double> merged(kBins, 0.0);
        for (size_t b = 0; b < kBins; ++b) merged[b / 2] += counts_[b];
        counts_ = std::move(merged);
        top_ *= 2;
      }
    }
  }
  if (top_ == 0) {
    counts_[0] += static_cast<double>(count);
    total_ += static_cast<double>(count);
    return;
  }
  const float per_bin = static_cast<float>(kBins) / top_;
  for (size_t i = 0; i < count; ++i) {
    if (!std::isfinite(values[i])) continue;
    const size_t b = std::min(kBins - 1, static_cast<size_t>(std::fabs(values[i]) * per_bin));
    counts_[b] += 1;
    total_ += 1;
  }
}

float AbsHistogram::percentile(double percentile) const {
  if (total_ == 0 || top_ == 0) return 0;
  const double wanted = total_ * std::clamp(percentile, 0.0, 100.0) / 100.0;
  double seen = 0;
  for (size_t b = 0; b < kBins; ++b) {
    seen += counts_[b];
    if (seen >= wanted) return top_ * static_cast<float>(b + 1) / static_cast<float>(kBins);
  }
  return top_;
}

namespace {

struct Observer {
  float lo = INFINITY, hi = -INFINITY;
  AbsHistogram histogram;
};

}  // namespace

std::map<std::string, TensorRange> calibrate(Graph graph, const std::vector<std::string>& tensors,
                                             const std::vector<TensorMap>& samples, const CalibrationOptions& options,
                                             const CalibrationProgress& progress) {
  const std::string model_path = graph.path;
  if (samples.empty()) throw Error(model_path + ": calibration needs at least one sample");
  std::vector<std::string> declared;
  for (const auto& o : graph.outputs) declared.push_back(o.name);
  // The tensors to observe become extra graph outputs, so the optimiser keeps them.
  for (const auto& name : tensors)
    if (std::find(declared.begin(), declared.end(), name) == declared.end()) {
      ValueDecl decl;
      decl.name = name;
      decl.dtype = DType::f32;
      graph.outputs.push_back(decl);
    }
  EngineOptions engine_options;
  engine_options.threads = options.threads;
  Engine engine(engine_options);
  Session session(engine, model_from_graph(std::move(graph)));

  std::map<std::string, Observer> observers;
  for (size_t s = 0; s < samples.size(); ++s) {
    TensorMap outputs = session.run(samples[s]);
    for (const auto& name : tensors) {
      auto it = outputs.find(name);
      if (it == outputs.end()) throw Error(model_path + ": calibration: tensor '" + name + "' was not computed");
      const Tensor& t = it->second;
      if (t.dtype() != DType::f32)
        throw Error(model_path + ": calibration: tensor '" + name + "' is " + std::string(dtype_name(t.dtype())) +
                    ", not float32");
      Observer& o = observers[name];
      for (float v : t.span<float>())
        if (std::isfinite(v)) o.lo = std::min(o.lo, v), o.hi = std::max(o.hi, v);
      if (options.method == CalibrationMethod::percentile) o.histogram.add(t.data<float>(), static_cast<size_t>(t.numel()));
    }
    if (progress) progress(s + 1, samples.size());
  }
  std::map<std::string, TensorRange> ranges;
  for (auto& [name, o] : observers) {
    TensorRange r{std::isfinite(o.lo) ? o.lo : 0.0f, std::isfinite(o.hi) ? o.hi : 0.0f};
    if (options.method == CalibrationMethod::percentile) {
      const float clip = o.histogram.percentile(options.percentile);
      r.lo = std::max(r.lo, -clip);
      r.hi = std::min(r.hi, clip);
    }
    ranges[name] = r;
  }
  return ranges;
}

}  // namespace grove::quantize
