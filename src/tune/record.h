#pragma once
// Tuning records: what `grove tune` measured as the best primitive and tile grid per Conv of
// one model, on one machine, at one thread count and precision (docs/tuning.md). A record is a
// small text file in a per-machine folder of the cache; a session finds the one whose keys
// match and plans with its choices. The keys make a record of another model, machine, thread
// count or precision unusable by construction, and a corrupt file is an Error, never a guess.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "graph/graph.h"
#include "grove/tuning.h"

namespace grove::tune {

struct TuningRecord {
  std::string machine;    // kernels::machine_key() where it was measured
  std::string model;      // model_key() of the planned graph
  int threads = 1;
  std::string precision;  // "fp32" or "bf16"
  double default_ms = 0;  // the model's median latency planned by the rules, and with the choices,
  double tuned_ms = 0;    // measured interleaved by grove tune
  std::vector<NodeChoice> choices;  // empty when nothing measured faster than the rules
  std::vector<double> node_us;      // per choice: the node's tile time per run as chosen
  std::vector<double> rule_us;      // per choice: the same node's tile time planned by the rules
  // kMeasuredByTrial for a session's plan trial (runtime/plan_trial.h): default_ms is then the
  // rules' plan, tuned_ms the performance model's, and the choices the model's where its plan
  // was kept. Empty for grove tune's.
  std::string measured_by;
  // kMeasuredByPruningTrial (runtime/plan_trial.h): pruned convs on Winograd against the
  // pruned GEMM, for one model pruned one way. default_ms is then the Winograd plan's,
  // tuned_ms the GEMM's, there are no choices, and this says which plan was kept: "winograd"
  // or "gemm". Empty for every other record.
  std::string pruned_convs;
};

inline constexpr const char* kMeasuredByTrial = "plan-trial";
inline constexpr const char* kMeasuredByPruningTrial = "pruning-trial";

// The planned graph's structure: nodes, attributes, value shapes and dtypes, initializer
// shapes and dtypes, but not weight values (a retrained model of one architecture keeps its
// record). 16 hex digits.
std::string model_key(const Graph& planned);

// $GROVE_TUNE_DIR, else $XDG_CACHE_HOME/grove/tune, else $HOME/.cache/grove/tune; then a
// folder per machine (a hash of kernels::machine_key()). Empty when none of them is set.
std::string machine_tuning_dir();
// The record's file name inside machine_tuning_dir().
std::string record_file_name(const std::string& model, int threads, const std::string& precision);

std::string save_record(const TuningRecord& record);
// Throws Error naming `source` and the line for anything it cannot read.
TuningRecord parse_record(std::string_view text, const std::string& source);
TuningRecord load_record_file(const std::string& path);
void write_record_file(const TuningRecord& record, const std::string& path);

// Held while a process settles what the record at `record_path` will say (a plan trial): a
// second process asking for the same record waits here, then reads what the first wrote, so
// every process plans the model alike. A no-op where the lock file cannot be made (no cache
// folder, a read-only one).
class RecordLock {
 public:
  explicit RecordLock(const std::string& record_path);
  ~RecordLock();
  RecordLock(const RecordLock&) = delete;
  RecordLock& operator=(const RecordLock&) = delete;

 private:
  int fd_ = -1;
};

// Why `record` may not be used for this plan ("" when it may): a different machine, model,
// thread count or precision.
std::string record_mismatch(const TuningRecord& record, const std::string& model, int threads,
                            const std::string& precision);

}  // namespace grove::tune
