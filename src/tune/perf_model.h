#pragma once
// A learned performance model of primitives (paper 003, "NN2"): one small network maps a
// layer configuration to the run time of every primitive at once, so a primitive selector can
// price a new layer without profiling it. Primitives share what they learn about a machine
// (paper 003, 5.1: one network for all primitives beats one per primitive), and a model
// trained on one machine is moved to another by fine-tuning on a few of its measurements.
//
// The features are whatever describes a configuration (channels, plane size, kernel, stride,
// groups, batch, tile count, threads, ...). Passing sizes as logs helps both models: run time
// is close to a product of sizes, which logs make a sum.
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graph/error.h"

namespace grove::tune {

// One measured configuration. times[k] is primitive k's run time (> 0, any unit, the same for
// all samples), or NaN where primitive k does not apply to this configuration: a NaN target is
// masked, so it neither adds to the loss nor moves any weight.
struct PerfSample {
  std::vector<double> features;
  std::vector<double> times;
};

struct TrainOptions {
  std::vector<int> hidden = {64, 64};  // hidden layer widths; fine_tune keeps the model's own
  int epochs = 300;
  int batch = 32;
  // Paper 003 fine-tunes at a tenth of the training rate (Table 3).
  double learning_rate = 1e-3;
  // L2 on the weights (not the biases), added to the gradient. fine_tune pulls towards the
  // weights it started from rather than towards zero, so the few samples of the new machine
  // adjust the old model instead of wearing it away.
  double weight_decay = 0;
  uint64_t seed = 1;  // weight initialisation and the order of samples in each epoch
  // The rate falls along a half cosine from learning_rate towards zero over the epochs. The
  // paper stops early on a validation set instead; with a fixed budget, annealing keeps the
  // final weights from depending on the noise of the last few minibatches.
  bool anneal = true;
};

// An MLP from standardised features to the standardised log(time) of every output: ReLU-like
// hidden layers, a linear output layer, masked mean squared error, Adam.
class PerfModel {
 public:
  // Throws Error naming the first bad sample (empty set, lengths that differ from sample 0's,
  // a non-finite feature, a time that is not NaN and not a finite positive number), for bad
  // options, and when some output has no measured time in any sample.
  static PerfModel train(std::span<const PerfSample> samples, const TrainOptions& o);
  // Transfer learning: first moves each output by the mean of its log-time errors on the
  // samples (a machine that is uniformly faster at a primitive needs nothing more), then
  // continues from those weights with fresh Adam state (and weight decay towards them, see
  // TrainOptions::weight_decay); o.epochs = 0 stops after the first step. The feature
  // and target normalisation stay those of the original training set, since the weights were
  // learned on that scale. o.hidden is ignored. Samples are validated as for train(), and
  // must have this model's numbers of inputs and outputs.
  void fine_tune(std::span<const PerfSample> samples, const TrainOptions& o);

  // Predicted times (not logs), one per output. Throws Error for a wrong feature count or a
  // non-finite feature.
  std::vector<double> predict(std::span<const double> features) const;
  size_t inputs() const { return feature_mean_.size(); }
  size_t outputs() const { return target_mean_.size(); }

  // What each output is (the primitives a selector prices by name), saved with the model.
  // Empty for a version 1 file, which did not record them. Throws Error unless there is one
  // name per output, each a word without whitespace.
  void set_output_names(std::vector<std::string> names);
  const std::vector<std::string>& output_names() const { return output_names_; }
  // How far off each output's predictions are: the MdRAE on data the model was not trained
  // on (grove tune --fit measures it), so a selector does not act on differences smaller than
  // the model can tell; 0 where unknown. Throws Error unless there is one finite value >= 0
  // per output.
  void set_output_errors(std::vector<double> errors);
  const std::vector<double>& output_errors() const { return output_errors_; }

  // A versioned text format; numbers are written in their shortest exact form, so load(save())
  // predicts bit-identically. First line "grove-perf-model 2" (version 1, without the output
  // names and errors, still loads).
  std::string save() const;
  // Any corrupt text (wrong header or version, inconsistent counts, non-numbers, non-finite
  // values, truncation, trailing data) is an Error; no allocation exceeds the text's size.
  static PerfModel load(std::string_view text);

  // Weights and biases of one layer, out x in row-major: exposed for tests and tools.
  struct Layer {
    size_t in = 0, out = 0;
    std::vector<double> weights, bias;
  };
  const std::vector<Layer>& layers() const { return layers_; }

 private:
  std::vector<double> feature_mean_, feature_std_;
  std::vector<double> target_mean_, target_std_;  // of log(time), per output
  std::vector<Layer> layers_;
  std::vector<std::string> output_names_;
  std::vector<double> output_errors_;  // empty: unknown
};

// The baseline of paper 003: per output, ridge least squares of log(time) on the standardised
// features plus an intercept (which is not penalised), fitted on the samples where that
// output is measured. Throws Error as PerfModel::train does, for a negative ridge, and when
// a system is singular (ridge 0 with too few samples).
class LinearModel {
 public:
  static LinearModel train(std::span<const PerfSample> samples, double ridge = 1e-6);
  std::vector<double> predict(std::span<const double> features) const;
  size_t inputs() const { return feature_mean_.size(); }
  size_t outputs() const { return coefficients_.size(); }

 private:
  std::vector<double> feature_mean_, feature_std_;
  std::vector<std::vector<double>> coefficients_;  // per output: intercept, then one per feature
};

// Median relative absolute error |predicted - measured| / measured over the measured (non-NaN)
// times of output `output`, or of all outputs when output < 0; NaN when there are none. The
// median of an even count is the mean of the two middle values. Throws Error when `predict`
// returns a count other than a sample's number of times, or `output` is out of range.
double mdrae(std::span<const PerfSample> samples, const std::function<std::vector<double>(std::span<const double>)>& predict,
             int output = -1);

// A seeded shuffle split. test gets round(test_share * n) samples, but at least 1 and at most
// n - 1 when n >= 2 so that neither side is empty; with n < 2 everything is in train. Throws
// Error for a test_share outside [0, 1].
struct SampleSplit {
  std::vector<PerfSample> train, test;
};
SampleSplit split_samples(std::span<const PerfSample> samples, double test_share, uint64_t seed);

}  // namespace grove::tune
