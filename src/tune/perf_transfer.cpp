#include "tune/perf_transfer.h"

#include <cmath>
#include <filesystem>
#include <fstream>

namespace grove::tune {

TrainOptions nn2_options(uint64_t seed) {
  TrainOptions t;
  t.hidden = {64, 64};
  t.epochs = 300;
  t.learning_rate = 3e-3;
  t.weight_decay = 1e-4;
  t.seed = seed + 1;
  return t;
}

Transferred transfer_model(PerfModel base, const std::vector<std::string>& primitives,
                           std::span<const PerfSample> train, std::span<const PerfSample> test,
                           const std::vector<bool>& measured, uint64_t seed) {
  base.set_output_names(primitives);  // a version 1 file's, named
  Transferred t{base, 0};
  TrainOptions fine = nn2_options(seed);
  fine.learning_rate = 1e-3;
  fine.weight_decay = 1e-2;  // towards the other machine's weights: a few samples adjust them, not replace them
  t.model.fine_tune(train, fine);
  t.as_is = mdrae(test, [&](auto f) { return base.predict(f); });
  // The selection acts only on differences larger than what the model can tell. An output
  // without samples here is trusted no more than the other machine's model as a whole was.
  std::vector<double> errors;
  for (size_t k = 0; k < primitives.size(); ++k) {
    const double e = mdrae(test, [&](auto f) { return t.model.predict(f); }, static_cast<int>(k));
    errors.push_back(k < measured.size() && !measured[k] ? (std::isnan(t.as_is) ? 1.0 : t.as_is) : std::isnan(e) ? 0.0 : e);
  }
  t.model.set_output_errors(errors);
  return t;
}

void install_perf_model(const PerfModel& model, const std::string& path) {
  std::error_code ec;
  if (const auto parent = std::filesystem::path(path).parent_path(); !parent.empty())
    std::filesystem::create_directories(parent, ec);
  {
    std::ofstream f(path + ".partial", std::ios::binary | std::ios::trunc);
    f << model.save();
    if (!f) throw Error(path + ": cannot write the performance model");
  }
  std::filesystem::rename(path + ".partial", path, ec);
  if (ec) throw Error(path + ": cannot write the performance model (" + ec.message() + ")");
}

}  // namespace grove::tune
