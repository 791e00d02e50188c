// The NN2 performance model of paper 003 (an MLP trained on masked log-times with Adam), its
// linear baseline, the MdRAE metric and a seeded train/test split.
#include "tune/perf_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>
#include <random>

namespace grove::tune {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The paper uses plain ReLU. A small leak keeps a unit that a fine-tune on a handful of
// samples pushes below zero everywhere from never getting a gradient again.
constexpr double kLeak = 0.01;

constexpr double kBeta1 = 0.9, kBeta2 = 0.999, kAdamEpsilon = 1e-8;

// Bounds on what load() accepts, so that a corrupt count is refused before anything is sized
// by it; trained models are far smaller.
constexpr size_t kMaxWidth = size_t{1} << 20;
constexpr size_t kMaxLayers = 64;

// Our own draws from the raw engine output: the standard distributions are implementation
// defined, and a model should not change with the standard library it was built with.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }
size_t below(std::mt19937_64& rng, size_t n) { return static_cast<size_t>(uniform01(rng) * static_cast<double>(n)) % n; }

void shuffle(std::vector<size_t>& v, std::mt19937_64& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(rng, i)]);
}

bool measured(double t) { return !std::isnan(t); }

// Sample i is checked against sample 0 (or against a model's sizes when they are given).
void validate_samples(std::span<const PerfSample> samples, size_t inputs = 0, size_t outputs = 0) {
  if (samples.empty()) throw Error("perf model: no samples");
  if (inputs == 0) inputs = samples[0].features.size();
  if (outputs == 0) outputs = samples[0].times.size();
  if (inputs == 0) throw Error("perf model: sample 0 has no features");
  if (outputs == 0) throw Error("perf model: sample 0 has no times");
  for (size_t i = 0; i < samples.size(); ++i) {
    const PerfSample& s = samples[i];
    const std::string where = "perf model: sample " + std::to_string(i);
    if (s.features.size() != inputs)
      throw Error(where + " has " + std::to_string(s.features.size()) + " features, expected " + std::to_string(inputs));
    if (s.times.size() != outputs)
      throw Error(where + " has " + std::to_string(s.times.size()) + " times, expected " + std::to_string(outputs));
    for (size_t j = 0; j < inputs; ++j)
      if (!std::isfinite(s.features[j])) throw Error(where + ": feature " + std::to_string(j) + " is not finite");
    for (size_t k = 0; k < outputs; ++k) {
      const double t = s.times[k];
      if (measured(t) && !(std::isfinite(t) && t > 0))
        throw Error(where + ": time " + std::to_string(k) + " is " + std::to_string(t) + ", not a positive number or NaN");
    }
  }
}

void validate_options(const TrainOptions& o, bool check_hidden) {
  if (check_hidden)
    for (int h : o.hidden)
      if (h < 1 || static_cast<size_t>(h) > kMaxWidth)
        throw Error("perf model: hidden width " + std::to_string(h) + " is out of range");
  if (o.epochs < 0) throw Error("perf model: epochs must be >= 0");
  if (o.batch < 1) throw Error("perf model: batch must be >= 1");
  if (!(std::isfinite(o.learning_rate) && o.learning_rate > 0)) throw Error("perf model: learning_rate must be positive");
  if (!(std::isfinite(o.weight_decay) && o.weight_decay >= 0)) throw Error("perf model: weight_decay must be >= 0");
}

// Mean and standard deviation of column j of the values (row-major, `cols` wide), skipping
// NaNs. A column that is constant up to rounding gets std 1: dividing by a rounding residue
// would turn any other value met later into a huge input.
struct Moments {
  std::vector<double> mean, std;
};
Moments column_moments(const std::vector<double>& values, size_t cols) {
  Moments m{std::vector<double>(cols, 0), std::vector<double>(cols, 1)};
  for (size_t j = 0; j < cols; ++j) {
    double sum = 0;
    size_t n = 0;
    for (size_t i = j; i < values.size(); i += cols)
      if (measured(values[i])) sum += values[i], ++n;
    if (n == 0) continue;
    const double mean = sum / static_cast<double>(n);
    double squares = 0;
    for (size_t i = j; i < values.size(); i += cols)
      if (measured(values[i])) squares += (values[i] - mean) * (values[i] - mean);
    const double std = std::sqrt(squares / static_cast<double>(n));
    m.mean[j] = mean;
    m.std[j] = std > 1e-12 * std::max(1.0, std::abs(mean)) ? std : 1;
  }
  return m;
}

std::vector<double> raw_features(std::span<const PerfSample> samples) {
  std::vector<double> x;
  x.reserve(samples.size() * samples[0].features.size());
  for (const PerfSample& s : samples) x.insert(x.end(), s.features.begin(), s.features.end());
  return x;
}

std::vector<double> log_times(std::span<const PerfSample> samples) {
  std::vector<double> y;
  y.reserve(samples.size() * samples[0].times.size());
  for (const PerfSample& s : samples)
    for (double t : s.times) y.push_back(measured(t) ? std::log(t) : kNaN);
  return y;
}

// In place, per column; NaNs stay NaN.
void standardise(std::vector<double>& values, const std::vector<double>& mean, const std::vector<double>& std) {
  const size_t cols = mean.size();
  for (size_t i = 0; i < values.size(); ++i) values[i] = (values[i] - mean[i % cols]) / std[i % cols];
}

void require_every_output_measured(std::span<const PerfSample> samples) {
  for (size_t k = 0; k < samples[0].times.size(); ++k)
    if (std::none_of(samples.begin(), samples.end(), [&](const PerfSample& s) { return measured(s.times[k]); }))
      throw Error("perf model: output " + std::to_string(k) + " has no measured time in any sample");
}

using Layer = PerfModel::Layer;

// y += a * x, the inner loop of every pass. Written four lanes at a time because GCC's -O2
// cost model vectorises that form but not a plain loop that needs a remainder.
void axpy(double a, const double* __restrict x, double* __restrict y, size_t n) {
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const double x0 = x[i], x1 = x[i + 1], x2 = x[i + 2], x3 = x[i + 3];
    y[i] += a * x0;
    y[i + 1] += a * x1;
    y[i + 2] += a * x2;
    y[i + 3] += a * x3;
  }
  for (; i < n; ++i) y[i] += a * x[i];
}

// Forward pass of one sample; acts[l] is the input of layer l, acts.back() the output.
// `transposed` holds each layer's weights in x out, so that the pass is a sum of rows (axpy)
// rather than dot products, which the compiler may not reorder into vectors.
void forward(const std::vector<Layer>& layers, const std::vector<std::vector<double>>& transposed,
             std::vector<std::vector<double>>& acts) {
  for (size_t l = 0; l < layers.size(); ++l) {
    const Layer& layer = layers[l];
    const std::vector<double>& in = acts[l];
    std::vector<double>& out = acts[l + 1];
    std::copy(layer.bias.begin(), layer.bias.end(), out.begin());
    for (size_t i = 0; i < layer.in; ++i) axpy(in[i], &transposed[l][i * layer.out], out.data(), layer.out);
    if (l + 1 < layers.size())
      for (double& z : out) z = z < 0 ? kLeak * z : z;
  }
}

void transpose(const std::vector<Layer>& layers, std::vector<std::vector<double>>& transposed) {
  transposed.resize(layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    const Layer& layer = layers[l];
    transposed[l].resize(layer.weights.size());
    for (size_t o = 0; o < layer.out; ++o)
      for (size_t i = 0; i < layer.in; ++i) transposed[l][i * layer.out + o] = layer.weights[o * layer.in + i];
  }
}

// Adds one sample's gradient to `grad`, given its forward pass and the error of each output
// (deltas.back()). The other deltas are scratch space.
void backward(const std::vector<Layer>& layers, const std::vector<std::vector<double>>& acts,
              std::vector<std::vector<double>>& deltas, std::vector<Layer>& grad) {
  for (size_t l = layers.size(); l-- > 0;) {
    const Layer& layer = layers[l];
    const std::vector<double>& in = acts[l];
    const std::vector<double>& d = deltas[l + 1];
    for (size_t out = 0; out < layer.out; ++out) {
      if (d[out] == 0) continue;  // a masked output, or a unit that did not move
      axpy(d[out], in.data(), &grad[l].weights[out * layer.in], layer.in);
      grad[l].bias[out] += d[out];
    }
    if (l == 0) break;
    std::vector<double>& back = deltas[l];
    std::fill(back.begin(), back.end(), 0);
    for (size_t out = 0; out < layer.out; ++out)
      if (d[out] != 0) axpy(d[out], &layer.weights[out * layer.in], back.data(), layer.in);
    // A leaky unit's output has the sign of its input, so the output tells the slope.
    for (size_t i = 0; i < layer.in; ++i)
      if (in[i] < 0) back[i] *= kLeak;
  }
}

void clear(std::vector<Layer>& layers) {
  for (Layer& layer : layers) {
    std::fill(layer.weights.begin(), layer.weights.end(), 0);
    std::fill(layer.bias.begin(), layer.bias.end(), 0);
  }
}

std::vector<Layer> zeros_like(std::vector<Layer> layers) {
  clear(layers);
  return layers;
}

// Adam with bias correction. Weight decay is added to the gradient (as in the paper's
// PyTorch setup) and pulls towards `anchor`; biases are not decayed, since pulling an offset
// anywhere only adds error.
class Adam {
 public:
  Adam(const std::vector<Layer>& layers, std::vector<Layer> anchor)
      : m_(zeros_like(layers)), v_(zeros_like(layers)), anchor_(std::move(anchor)) {}

  void step(std::vector<Layer>& layers, const std::vector<Layer>& grad, double rate, double decay) {
    ++steps_;
    const double correction1 = 1 - std::pow(kBeta1, static_cast<double>(steps_));
    const double correction2 = 1 - std::pow(kBeta2, static_cast<double>(steps_));
    auto update = [&](std::vector<double>& p, const std::vector<double>& g, std::vector<double>& m, std::vector<double>& v,
                      const std::vector<double>& anchor, double decay_here) {
      for (size_t i = 0; i < p.size(); ++i) {
        const double gi = g[i] + decay_here * (p[i] - anchor[i]);
        m[i] = kBeta1 * m[i] + (1 - kBeta1) * gi;
        v[i] = kBeta2 * v[i] + (1 - kBeta2) * gi * gi;
        p[i] -= rate * (m[i] / correction1) / (std::sqrt(v[i] / correction2) + kAdamEpsilon);
      }
    };
    for (size_t l = 0; l < layers.size(); ++l) {
      update(layers[l].weights, grad[l].weights, m_[l].weights, v_[l].weights, anchor_[l].weights, decay);
      update(layers[l].bias, grad[l].bias, m_[l].bias, v_[l].bias, anchor_[l].bias, 0);
    }
  }

 private:
  std::vector<Layer> m_, v_, anchor_;
  int64_t steps_ = 0;
};

// Minibatch Adam on the masked mean squared error. x and y are standardised, row-major; a NaN
// in y is a target that does not exist, so its output gets no error to propagate. Weight
// decay pulls towards zero, or with decay_to_start towards the weights fitting began from
// (L2-SP): when fine-tuning on a few samples, what the first machine taught is a better
// prior than small weights.
void fit(std::vector<Layer>& layers, const std::vector<double>& x, const std::vector<double>& y, const TrainOptions& o,
         bool decay_to_start) {
  const size_t inputs = layers.front().in, outputs = layers.back().out;
  const size_t n = x.size() / inputs;
  const size_t batch = static_cast<size_t>(o.batch);
  // A stream apart from the initialisation's, which used the seed itself.
  std::mt19937_64 rng(o.seed ^ 0x9e37'79b9'7f4a'7c15ULL);

  Adam adam(layers, decay_to_start ? layers : zeros_like(layers));
  std::vector<Layer> grad = zeros_like(layers);
  std::vector<std::vector<double>> acts(layers.size() + 1), deltas(layers.size() + 1), transposed;
  acts[0].resize(inputs);
  for (size_t l = 0; l < layers.size(); ++l) acts[l + 1].resize(layers[l].out), deltas[l + 1].resize(layers[l].out);
  transpose(layers, transposed);

  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  for (int epoch = 0; epoch < o.epochs; ++epoch) {
    const double progress = static_cast<double>(epoch) / o.epochs;
    const double rate = o.anneal ? o.learning_rate * 0.5 * (1 + std::cos(std::numbers::pi * progress)) : o.learning_rate;
    shuffle(order, rng);
    for (size_t begin = 0; begin < n; begin += batch) {
      const size_t end = std::min(n, begin + batch);
      // The mean is over the targets that exist, so a batch of mostly masked entries still
      // moves the weights as far as a full one.
      size_t targets = 0;
      for (size_t b = begin; b < end; ++b)
        for (size_t k = 0; k < outputs; ++k) targets += measured(y[order[b] * outputs + k]);
      if (targets == 0) continue;
      const double scale = 2.0 / static_cast<double>(targets);

      clear(grad);
      for (size_t b = begin; b < end; ++b) {
        const size_t row = order[b];
        std::copy_n(&x[row * inputs], inputs, acts[0].begin());
        forward(layers, transposed, acts);
        for (size_t k = 0; k < outputs; ++k) {
          const double target = y[row * outputs + k];
          deltas.back()[k] = measured(target) ? scale * (acts.back()[k] - target) : 0;
        }
        backward(layers, acts, deltas, grad);
      }
      adam.step(layers, grad, rate, o.weight_decay);
      transpose(layers, transposed);
    }
  }
  for (const Layer& layer : layers)
    for (const std::vector<double>* p : {&layer.weights, &layer.bias})
      if (!std::all_of(p->begin(), p->end(), [](double w) { return std::isfinite(w); }))
        throw Error("perf model: training diverged (non-finite weights); lower learning_rate");
}

// Adds to each output's bias the mean error of its measured targets (standardised, so in
// log time): where a machine runs a primitive uniformly faster or slower than the one the
// model learned on, this alone fits it, and fine-tuning starts from there.
void shift_outputs(std::vector<Layer>& layers, const std::vector<double>& x, const std::vector<double>& y) {
  const size_t inputs = layers.front().in, outputs = layers.back().out, n = x.size() / inputs;
  std::vector<std::vector<double>> acts(layers.size() + 1), transposed;
  acts[0].resize(inputs);
  for (size_t l = 0; l < layers.size(); ++l) acts[l + 1].resize(layers[l].out);
  transpose(layers, transposed);
  std::vector<double> sum(outputs, 0), count(outputs, 0);
  for (size_t i = 0; i < n; ++i) {
    std::copy_n(&x[i * inputs], inputs, acts[0].begin());
    forward(layers, transposed, acts);
    for (size_t k = 0; k < outputs; ++k)
      if (measured(y[i * outputs + k])) sum[k] += y[i * outputs + k] - acts.back()[k], count[k] += 1;
  }
  for (size_t k = 0; k < outputs; ++k)
    if (count[k] > 0) layers.back().bias[k] += sum[k] / count[k];
}

void check_features(std::span<const double> features, size_t inputs) {
  if (features.size() != inputs)
    throw Error("perf model: " + std::to_string(features.size()) + " features given, the model takes " + std::to_string(inputs));
  for (size_t j = 0; j < features.size(); ++j)
    if (!std::isfinite(features[j])) throw Error("perf model: feature " + std::to_string(j) + " is not finite");
}

// --- text format ---

void put(std::string& out, double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest form that reads back exactly
  out.push_back(' ');
  out.append(buf, r.ptr);
}

void put_line(std::string& out, std::string_view key, const std::vector<double>& values) {
  out += key;
  for (double v : values) put(out, v);
  out += '\n';
}

// Whitespace-separated tokens; every failure names what was expected.
class Reader {
 public:
  explicit Reader(std::string_view text) : text_(text) {}

  std::string_view token(std::string_view what) {
    skip_space();
    const size_t begin = pos_;
    while (pos_ < text_.size() && !is_space(text_[pos_])) ++pos_;
    if (begin == pos_) fail("truncated, expected " + std::string(what));
    return text_.substr(begin, pos_ - begin);
  }
  void expect(std::string_view word) {
    if (token(word) != word) fail("expected '" + std::string(word) + "'");
  }
  size_t count(std::string_view what, size_t min, size_t max) {
    const std::string_view t = token(what);
    size_t v = 0;
    const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
    if (r.ec != std::errc() || r.ptr != t.data() + t.size() || v < min || v > max)
      fail(std::string(what) + " '" + std::string(t.substr(0, 32)) + "' is not a count in [" + std::to_string(min) + ", " +
           std::to_string(max) + "]");
    return v;
  }
  double number(std::string_view what) {
    const std::string_view t = token(what);
    double v = 0;
    const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
    if (r.ec != std::errc() || r.ptr != t.data() + t.size() || !std::isfinite(v))
      fail(std::string(what) + ": '" + std::string(t.substr(0, 32)) + "' is not a finite number");
    return v;
  }
  // Sized by what is read, not by n: a huge declared count runs out of text, not of memory.
  std::vector<double> numbers(std::string_view what, size_t n) {
    std::vector<double> v;
    v.reserve(std::min(n, (text_.size() - pos_) / 2 + 1));
    for (size_t i = 0; i < n; ++i) v.push_back(number(what));
    return v;
  }
  void expect_end() {
    skip_space();
    if (pos_ != text_.size()) fail("unexpected text after 'end'");
  }
  [[noreturn]] void fail(const std::string& why) const { throw Error("perf model file: " + why); }

 private:
  static bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
  void skip_space() {
    while (pos_ < text_.size() && is_space(text_[pos_])) ++pos_;
  }
  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

PerfModel PerfModel::train(std::span<const PerfSample> samples, const TrainOptions& o) {
  validate_samples(samples);
  validate_options(o, true);
  require_every_output_measured(samples);
  const size_t inputs = samples[0].features.size(), outputs = samples[0].times.size();

  PerfModel model;
  std::vector<double> x = raw_features(samples), y = log_times(samples);
  Moments fm = column_moments(x, inputs), tm = column_moments(y, outputs);
  standardise(x, fm.mean, fm.std);
  standardise(y, tm.mean, tm.std);
  model.feature_mean_ = std::move(fm.mean);
  model.feature_std_ = std::move(fm.std);
  model.target_mean_ = std::move(tm.mean);
  model.target_std_ = std::move(tm.std);

  // He-uniform weights keep the scale of standardised inputs through the leaky units; the
  // linear output layer gets the Glorot bound. Biases start at zero.
  std::mt19937_64 rng(o.seed);
  size_t in = inputs;
  for (size_t l = 0; l <= o.hidden.size(); ++l) {
    const bool last = l == o.hidden.size();
    Layer layer;
    layer.in = in;
    layer.out = last ? outputs : static_cast<size_t>(o.hidden[l]);
    const double fan = static_cast<double>(last ? layer.in + layer.out : layer.in);
    const double bound = std::sqrt(6.0 / fan);
    layer.weights.resize(layer.in * layer.out);
    for (double& w : layer.weights) w = (2 * uniform01(rng) - 1) * bound;
    layer.bias.assign(layer.out, 0);
    in = layer.out;
    model.layers_.push_back(std::move(layer));
  }
  fit(model.layers_, x, y, o, false);
  return model;
}

void PerfModel::fine_tune(std::span<const PerfSample> samples, const TrainOptions& o) {
  if (layers_.empty()) throw Error("perf model: fine_tune needs a trained model");
  validate_samples(samples, inputs(), outputs());
  validate_options(o, false);
  std::vector<double> x = raw_features(samples), y = log_times(samples);
  standardise(x, feature_mean_, feature_std_);
  standardise(y, target_mean_, target_std_);
  std::vector<Layer> layers = layers_;  // the model stays as it was if fitting throws
  shift_outputs(layers, x, y);
  fit(layers, x, y, o, true);
  layers_ = std::move(layers);
}

std::vector<double> PerfModel::predict(std::span<const double> features) const {
  check_features(features, inputs());
  if (layers_.empty()) return {};
  std::vector<std::vector<double>> acts(layers_.size() + 1);
  acts[0].resize(inputs());
  for (size_t j = 0; j < inputs(); ++j) acts[0][j] = (features[j] - feature_mean_[j]) / feature_std_[j];
  for (size_t l = 0; l < layers_.size(); ++l) acts[l + 1].resize(layers_[l].out);
  std::vector<std::vector<double>> transposed;
  transpose(layers_, transposed);
  forward(layers_, transposed, acts);
  std::vector<double> times(outputs());
  for (size_t k = 0; k < outputs(); ++k) times[k] = std::exp(acts.back()[k] * target_std_[k] + target_mean_[k]);
  return times;
}

void PerfModel::set_output_names(std::vector<std::string> names) {
  if (names.size() != outputs())
    throw Error("perf model: " + std::to_string(names.size()) + " output names for " + std::to_string(outputs()) + " outputs");
  for (const std::string& n : names)
    if (n.empty() || std::any_of(n.begin(), n.end(), [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }))
      throw Error("perf model: output name '" + n + "' is empty or holds whitespace");
  output_names_ = std::move(names);
}

void PerfModel::set_output_errors(std::vector<double> errors) {
  if (errors.size() != outputs())
    throw Error("perf model: " + std::to_string(errors.size()) + " output errors for " + std::to_string(outputs()) + " outputs");
  for (double e : errors)
    if (!(std::isfinite(e) && e >= 0)) throw Error("perf model: an output error is not a finite number >= 0");
  output_errors_ = std::move(errors);
}

std::string PerfModel::save() const {
  std::string out = "grove-perf-model 2\n";
  out += "inputs " + std::to_string(inputs()) + "\noutputs " + std::to_string(outputs()) + "\nnames";
  for (size_t k = 0; k < outputs(); ++k) out += " " + (k < output_names_.size() ? output_names_[k] : "output" + std::to_string(k));
  out += "\n";
  put_line(out, "errors", output_errors_.size() == outputs() ? output_errors_ : std::vector<double>(outputs(), 0.0));
  put_line(out, "feature_mean", feature_mean_);
  put_line(out, "feature_std", feature_std_);
  put_line(out, "target_mean", target_mean_);
  put_line(out, "target_std", target_std_);
  out += "layers " + std::to_string(layers_.size()) + "\n";
  for (const Layer& layer : layers_) {
    out += "layer " + std::to_string(layer.in) + " " + std::to_string(layer.out) + "\n";
    put_line(out, "weights", layer.weights);
    put_line(out, "bias", layer.bias);
  }
  out += "end\n";
  return out;
}

PerfModel PerfModel::load(std::string_view text) {
  Reader r(text);
  if (r.token("header") != "grove-perf-model") r.fail("not a grove perf model (bad header)");
  const std::string_view version = r.token("version");
  if (version != "1" && version != "2") r.fail("unsupported version (this grove reads versions 1 and 2)");
  PerfModel m;
  r.expect("inputs");
  const size_t inputs = r.count("inputs", 1, kMaxWidth);
  r.expect("outputs");
  const size_t outputs = r.count("outputs", 1, kMaxWidth);
  if (version == "2") {
    r.expect("names");
    for (size_t k = 0; k < outputs; ++k) m.output_names_.emplace_back(r.token("output name"));
    r.expect("errors");
    m.output_errors_ = r.numbers("errors", outputs);
    for (double e : m.output_errors_)
      if (e < 0) r.fail("errors has a negative value");
  }
  auto positive = [&](const std::vector<double>& v, std::string_view what) {
    for (double s : v)
      if (!(s > 0)) r.fail(std::string(what) + " has a value that is not positive");
  };
  r.expect("feature_mean");
  m.feature_mean_ = r.numbers("feature_mean", inputs);
  r.expect("feature_std");
  m.feature_std_ = r.numbers("feature_std", inputs);
  positive(m.feature_std_, "feature_std");
  r.expect("target_mean");
  m.target_mean_ = r.numbers("target_mean", outputs);
  r.expect("target_std");
  m.target_std_ = r.numbers("target_std", outputs);
  positive(m.target_std_, "target_std");
  r.expect("layers");
  const size_t layers = r.count("layers", 1, kMaxLayers);
  size_t in = inputs;
  for (size_t l = 0; l < layers; ++l) {
    r.expect("layer");
    Layer layer;
    layer.in = r.count("layer inputs", 1, kMaxWidth);
    layer.out = r.count("layer outputs", 1, kMaxWidth);
    if (layer.in != in)
      r.fail("layer " + std::to_string(l) + " takes " + std::to_string(layer.in) + " inputs, expected " + std::to_string(in));
    if (l + 1 == layers && layer.out != outputs)
      r.fail("last layer gives " + std::to_string(layer.out) + " outputs, expected " + std::to_string(outputs));
    r.expect("weights");
    layer.weights = r.numbers("weights", layer.in * layer.out);
    r.expect("bias");
    layer.bias = r.numbers("bias", layer.out);
    in = layer.out;
    m.layers_.push_back(std::move(layer));
  }
  r.expect("end");
  r.expect_end();
  return m;
}

LinearModel LinearModel::train(std::span<const PerfSample> samples, double ridge) {
  validate_samples(samples);
  if (!(std::isfinite(ridge) && ridge >= 0)) throw Error("linear model: ridge must be >= 0");
  require_every_output_measured(samples);
  const size_t inputs = samples[0].features.size(), outputs = samples[0].times.size();
  const size_t p = inputs + 1;

  LinearModel model;
  std::vector<double> x = raw_features(samples);
  Moments fm = column_moments(x, inputs);
  standardise(x, fm.mean, fm.std);
  model.feature_mean_ = std::move(fm.mean);
  model.feature_std_ = std::move(fm.std);

  std::vector<double> row(p);
  for (size_t k = 0; k < outputs; ++k) {
    // Normal equations [A | b], with the intercept as column 0.
    std::vector<double> a(p * (p + 1), 0);
    for (size_t i = 0; i < samples.size(); ++i) {
      const double t = samples[i].times[k];
      if (!measured(t)) continue;
      row[0] = 1;
      std::copy_n(&x[i * inputs], inputs, row.begin() + 1);
      const double target = std::log(t);
      for (size_t r = 0; r < p; ++r) {
        for (size_t c = 0; c < p; ++c) a[r * (p + 1) + c] += row[r] * row[c];
        a[r * (p + 1) + p] += row[r] * target;
      }
    }
    double largest = 0;
    for (size_t r = 0; r < p; ++r) {
      if (r > 0) a[r * (p + 1) + r] += ridge;
      largest = std::max(largest, a[r * (p + 1) + r]);
    }
    // Gaussian elimination with partial pivoting; a pivot lost in rounding means the
    // features do not determine the fit.
    for (size_t c = 0; c < p; ++c) {
      size_t pivot = c;
      for (size_t r = c + 1; r < p; ++r)
        if (std::abs(a[r * (p + 1) + c]) > std::abs(a[pivot * (p + 1) + c])) pivot = r;
      if (!(std::abs(a[pivot * (p + 1) + c]) > 1e-12 * largest))
        throw Error("linear model: output " + std::to_string(k) + " is underdetermined (too few samples; use a ridge > 0)");
      if (pivot != c)
        for (size_t j = 0; j <= p; ++j) std::swap(a[c * (p + 1) + j], a[pivot * (p + 1) + j]);
      for (size_t r = c + 1; r < p; ++r) {
        const double f = a[r * (p + 1) + c] / a[c * (p + 1) + c];
        for (size_t j = c; j <= p; ++j) a[r * (p + 1) + j] -= f * a[c * (p + 1) + j];
      }
    }
    std::vector<double> w(p);
    for (size_t r = p; r-- > 0;) {
      double s = a[r * (p + 1) + p];
      for (size_t j = r + 1; j < p; ++j) s -= a[r * (p + 1) + j] * w[j];
      w[r] = s / a[r * (p + 1) + r];
    }
    model.coefficients_.push_back(std::move(w));
  }
  return model;
}

std::vector<double> LinearModel::predict(std::span<const double> features) const {
  check_features(features, inputs());
  std::vector<double> times;
  times.reserve(outputs());
  for (const std::vector<double>& w : coefficients_) {
    double z = w[0];
    for (size_t j = 0; j < inputs(); ++j) z += w[j + 1] * (features[j] - feature_mean_[j]) / feature_std_[j];
    times.push_back(std::exp(z));
  }
  return times;
}

double mdrae(std::span<const PerfSample> samples, const std::function<std::vector<double>(std::span<const double>)>& predict,
             int output) {
  std::vector<double> errors;
  for (size_t i = 0; i < samples.size(); ++i) {
    const PerfSample& s = samples[i];
    const std::string where = "mdrae: sample " + std::to_string(i);
    if (output >= 0 && static_cast<size_t>(output) >= s.times.size())
      throw Error(where + " has " + std::to_string(s.times.size()) + " times, no output " + std::to_string(output));
    const std::vector<double> predicted = predict(s.features);
    if (predicted.size() != s.times.size())
      throw Error(where + ": " + std::to_string(predicted.size()) + " predictions for " + std::to_string(s.times.size()) +
                  " times");
    for (size_t k = 0; k < s.times.size(); ++k) {
      if (output >= 0 && k != static_cast<size_t>(output)) continue;
      const double t = s.times[k];
      if (!measured(t)) continue;
      if (!(std::isfinite(t) && t > 0)) throw Error(where + ": time " + std::to_string(k) + " is not a positive number or NaN");
      errors.push_back(std::abs(predicted[k] - t) / t);
    }
  }
  if (errors.empty()) return kNaN;
  const size_t mid = errors.size() / 2;
  std::nth_element(errors.begin(), errors.begin() + static_cast<std::ptrdiff_t>(mid), errors.end());
  if (errors.size() % 2 == 1) return errors[mid];
  const double upper = errors[mid];
  const double lower = *std::max_element(errors.begin(), errors.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

SampleSplit split_samples(std::span<const PerfSample> samples, double test_share, uint64_t seed) {
  if (!(test_share >= 0 && test_share <= 1)) throw Error("split_samples: test_share must be in [0, 1]");
  const size_t n = samples.size();
  size_t test = 0;
  if (n >= 2) test = std::clamp<size_t>(static_cast<size_t>(std::llround(test_share * static_cast<double>(n))), 1, n - 1);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  shuffle(order, rng);
  SampleSplit split;
  split.test.reserve(test);
  split.train.reserve(n - test);
  for (size_t i = 0; i < n; ++i) (i < test ? split.test : split.train).push_back(samples[order[i]]);
  return split;
}

}  // namespace grove::tune
