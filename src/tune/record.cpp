#include "tune/record.h"

#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "graph/error.h"
#include "graph/graph_hash.h"
#include "kernels/cpu_info.h"

namespace grove::tune {
namespace {

constexpr const char* kRecordHeader = "grove-tune-record 1";
constexpr size_t kMaxChoices = 1 << 20;

std::string hex(uint64_t v) {
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, v);
  return text;
}

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string format_extent(const std::vector<int64_t>& extent) {
  if (extent.empty()) return "-";
  std::string text;
  for (size_t d = 0; d < extent.size(); ++d) text += (d ? "," : "") + std::to_string(extent[d]);
  return text;
}

}  // namespace

std::string model_key(const Graph& g) { return hex(graph_hash(g, false)); }

std::string machine_tuning_dir() {
  std::string base = env("GROVE_TUNE_DIR");
  if (base.empty() && !env("XDG_CACHE_HOME").empty()) base = env("XDG_CACHE_HOME") + "/grove/tune";
  if (base.empty() && !env("HOME").empty()) base = env("HOME") + "/.cache/grove/tune";
  if (base.empty()) return "";
  const std::string machine = kernels::machine_key();
  return base + "/" + hex(bytes_hash(machine.data(), machine.size()));
}

std::string record_file_name(const std::string& model, int threads, const std::string& precision) {
  return model + "-t" + std::to_string(threads) + "-" + precision + ".record";
}

std::string save_record(const TuningRecord& r) {
  std::ostringstream out;
  out.precision(6);
  out << kRecordHeader << "\n"
      << "machine " << r.machine << "\n"
      << "model " << r.model << "\n"
      << "threads " << r.threads << "\n"
      << "precision " << r.precision << "\n"
      << "default_ms " << r.default_ms << "\n"
      << "tuned_ms " << r.tuned_ms << "\n"
      << "choices " << r.choices.size() << "\n";
  for (size_t i = 0; i < r.choices.size(); ++i) {
    const NodeChoice& c = r.choices[i];
    out << "choice " << (c.primitive.empty() ? "-" : c.primitive) << " " << format_extent(c.extent) << " "
        << (i < r.node_us.size() ? r.node_us[i] : 0) << " " << (i < r.rule_us.size() ? r.rule_us[i] : 0) << " "
        << c.node << "\n";
  }
  if (!r.measured_by.empty()) out << "measured_by " << r.measured_by << "\n";
  if (!r.pruned_convs.empty()) out << "pruned_convs " << r.pruned_convs << "\n";
  return out.str();
}

TuningRecord parse_record(std::string_view text, const std::string& source) {
  std::istringstream in{std::string(text)};
  std::string line;
  int line_no = 0;
  auto fail = [&](const std::string& why) {
    return Error(source + ": line " + std::to_string(line_no) + ": " + why + " (not a tuning record, or a damaged one; run grove tune again)");
  };
  auto next = [&](const std::string& key) {
    if (!std::getline(in, line)) throw fail("ends before '" + key + "'");
    ++line_no;
    if (line.rfind(key + " ", 0) != 0) throw fail("expected '" + key + " ...'");
    return line.substr(key.size() + 1);
  };
  auto number = [&](const std::string& s) {
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (s.empty() || *end != '\0' || !std::isfinite(v) || v < 0) throw fail("'" + s + "' is not a number");
    return v;
  };
  auto count = [&](const std::string& s, double most) {
    const double v = number(s);
    if (v != std::floor(v) || v > most) throw fail("'" + s + "' is not a count");
    return static_cast<size_t>(v);
  };
  if (!std::getline(in, line) || (++line_no, line != kRecordHeader)) throw fail("the first line is not '" + std::string(kRecordHeader) + "'");
  TuningRecord r;
  r.machine = next("machine");
  r.model = next("model");
  r.threads = static_cast<int>(count(next("threads"), 1 << 16));
  r.precision = next("precision");
  if (r.precision != "fp32" && r.precision != "bf16" && r.precision != "int8w")
    throw fail("precision '" + r.precision + "' is not fp32, bf16 or int8w");
  r.default_ms = number(next("default_ms"));
  r.tuned_ms = number(next("tuned_ms"));
  const size_t choices = count(next("choices"), kMaxChoices);
  for (size_t i = 0; i < choices; ++i) {
    std::istringstream fields(next("choice"));
    std::string primitive, extent, node_us, rule_us;
    if (!(fields >> primitive >> extent >> node_us >> rule_us)) throw fail("a choice needs a primitive, an extent, two times and a node");
    std::string node;
    std::getline(fields, node);
    if (node.size() < 2 || node[0] != ' ') throw fail("a choice names no node");
    NodeChoice c;
    c.node = node.substr(1);
    c.primitive = primitive == "-" ? "" : primitive;
    if (extent != "-") {
      std::istringstream dims(extent);
      std::string d;
      while (std::getline(dims, d, ',')) c.extent.push_back(static_cast<int64_t>(count(d, 1e15)));
    }
    r.choices.push_back(std::move(c));
    r.node_us.push_back(number(node_us));
    r.rule_us.push_back(number(rule_us));
  }
  // Optional, after the choices: a record without it is grove tune's.
  if (std::getline(in, line) && (++line_no, !line.empty())) {
    if (line.rfind("measured_by ", 0) != 0) throw fail("expected 'measured_by ...' or the end");
    r.measured_by = line.substr(12);
    // Optional after it: a pruning trial's verdict.
    if (std::getline(in, line) && (++line_no, !line.empty())) {
      if (line != "pruned_convs winograd" && line != "pruned_convs gemm")
        throw fail("expected 'pruned_convs winograd', 'pruned_convs gemm' or the end");
      r.pruned_convs = line.substr(13);
    }
  }
  return r;
}

TuningRecord load_record_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(path + ": cannot open the tuning record");
  std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (text.size() > (size_t{64} << 20)) throw Error(path + ": too large for a tuning record");
  return parse_record(text, path);
}

void write_record_file(const TuningRecord& record, const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  // Written beside and renamed, so a session never reads half a record.
  const std::string temporary = path + ".partial";
  {
    std::ofstream f(temporary, std::ios::binary | std::ios::trunc);
    if (!f) throw Error(path + ": cannot write the tuning record");
    f << save_record(record);
    if (!f) throw Error(path + ": writing the tuning record failed");
  }
  std::filesystem::rename(temporary, path, ec);
  if (ec) throw Error(path + ": cannot write the tuning record (" + ec.message() + ")");
}

RecordLock::RecordLock(const std::string& record_path) {
  if (record_path.empty()) return;
  std::error_code ec;
  const std::filesystem::path p(record_path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  fd_ = ::open((record_path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return;
  int rc;
  do rc = ::flock(fd_, LOCK_EX);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

RecordLock::~RecordLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the lock
}

std::string record_mismatch(const TuningRecord& r, const std::string& model, int threads, const std::string& precision) {
  if (r.machine != kernels::machine_key()) return "it was measured on another machine (" + r.machine + ")";
  if (r.model != model) return "it was made for another model (key " + r.model + ", this one is " + model + ")";
  if (r.threads != threads)
    return "it was measured at " + std::to_string(r.threads) + " threads, this plan is for " + std::to_string(threads);
  if (r.precision != precision) return "it was measured in " + r.precision + ", this plan is " + precision;
  return "";
}

}  // namespace grove::tune
