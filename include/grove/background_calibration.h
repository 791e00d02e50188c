#pragma once
// Calibration of the shipped performance model to this machine in the background of a
// long-running process (docs/tuning.md): a thread that waits until an engine has had no job
// for a while, then profiles sampled conv layers one at a time on idle-priority threads, gives
// a layer up and measures it again later when a job arrives, and when every layer is measured
// fine-tunes the model grove ships for this ISA on them and installs it as this machine's
// model. Plans made after that use it. Nothing happens where this machine already has a model.
#include <cstdint>
#include <memory>
#include <string>

#include "grove/engine.h"

namespace grove {

struct BackgroundCalibrationOptions {
  double idle_seconds = 10;  // the watched engine idle this long before a layer is measured
  int samples = 25;          // sampled conv layers per thread count (1 and all cores), as grove tune --calibrate
  int runs = 10;             // traced runs per candidate and pass
  int passes = 2;
  uint64_t seed = 1;
  std::string model_out;     // "": this machine's model, where plans look (grove tune --fit's place)
};

struct BackgroundCalibrationStatus {
  // "waiting" (for idle cores), "measuring", "fitting", "done", "not needed" (this machine has
  // a model, or none ships for its ISA), "stopped" or "failed".
  std::string state;
  std::string detail;         // why not needed, the error, or the installed model's path and error
  std::string model_path;     // where this machine's model is looked for and installed ("" until known)
  int layers_measured = 0;    // of layers_total, over both thread counts
  int layers_total = 0;
  int64_t interruptions = 0;  // layers given up because a job arrived while they were measured
};

class BackgroundCalibration {
 public:
  // Watches `engine`, which must outlive this object. The calibration runs on engines of its own.
  explicit BackgroundCalibration(const Engine& engine, BackgroundCalibrationOptions options = {});
  ~BackgroundCalibration();  // stops the thread; a calibration not finished installs nothing
  BackgroundCalibration(const BackgroundCalibration&) = delete;
  BackgroundCalibration& operator=(const BackgroundCalibration&) = delete;

  BackgroundCalibrationStatus status() const;
  // Waits until the calibration ends (done, not needed, failed) or `seconds` pass; true if it ended.
  bool wait(double seconds) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace grove
