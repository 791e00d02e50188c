// Runs the ONNX backend node tests (Debian's libonnx-testdata) through grove's import,
// shape binding and reference executor, and prints passed / failed / skipped per op.
// A case is skipped only when grove reports it as unsupported (an op, dtype or attribute
// grove does not claim); every skip reason is printed. Each case runs in a forked child so
// one crashing op cannot hide the others' results.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "compare.h"
#include "onnx/import.h"
#include "runtime/session.h"
#include "runtime/model.h"

namespace fs = std::filesystem;
using namespace grove;

namespace {

enum class Outcome { pass, fail, skip };

struct CaseResult {
  Outcome outcome = Outcome::fail;
  std::string op;      // the op the case is counted under
  std::string detail;  // failure or skip reason
};

// The op a case tests: its single op type, or "composite" for function-expanded cases.
std::string case_op(const Graph& g) {
  std::set<std::string> types;
  for (const auto& n : g.nodes)
    if (n.name.find("__grove_") == std::string::npos) types.insert(n.op_type);  // not the importer's own Casts
  if (types.size() == 1) return *types.begin();
  return types.empty() ? "Constant" : "composite";
}

// Cases whose test data contradict their own model (ONNX 1.12's generator), with the reason;
// an empty string for every other case.
std::string defective_data(const std::string& name) {
  // An engine that checks input shapes against the model, as grove and ONNX Runtime do, must reject these.
  static const std::set<std::string> castlike = {
      "test_castlike_BFLOAT16_to_FLOAT", "test_castlike_BFLOAT16_to_FLOAT_expanded",
      "test_castlike_FLOAT_to_BFLOAT16", "test_castlike_FLOAT_to_BFLOAT16_expanded"};
  if (castlike.count(name)) return "the test data contradict the model: input 'like' is declared [3,4] but the data are [1]";
  if (name == "test_adam_multiple")
    return "the expected outputs use epsilon=1e-2 but the model's Adam node leaves epsilon at its default 1e-6 "
           "(onnx/onnx#7749)";
  return {};
}

// numpy has no bfloat16, so ONNX's generator stored bfloat16 test tensors as their uint16 bits.
Value as_declared(Value v, DType declared) {
  if (!v.is_tensor()) return v;
  const Tensor& t = v.tensor();
  if (declared != DType::bf16 || t.dtype() != DType::u16) return v;
  Tensor bits(DType::bf16, t.shape());
  std::memcpy(bits.raw(), t.raw(), t.bytes());
  return bits;
}

// "" when `got` matches `want`: the same kind, and tensors (each item of a sequence) within
// the tolerance of compare_tensors.
std::string compare_values(const Value& got, const Value& want) {
  if (got.kind() != want.kind()) return "got " + got.describe() + ", expected " + want.describe();
  if (got.is_none()) return "";
  if (got.is_tensor()) return compare_tensors(got.tensor(), want.tensor());
  if (got.items().size() != want.items().size()) return "got " + got.describe() + ", expected " + want.describe();
  for (size_t i = 0; i < got.items().size(); ++i)
    if (std::string diff = compare_tensors(got.items()[i], want.items()[i]); !diff.empty())
      return "item " + std::to_string(i) + ": " + diff;
  return "";
}

std::vector<fs::path> numbered(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (int i = 0;; ++i) {
    fs::path p = dir / (prefix + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    files.push_back(p);
  }
  return files;
}

// With `tiles`, every case also runs through the tile runtime at 1, 2, 3 and 8 workers, in
// both schedules, with tiles by rule and with every op cut into about 4 tiles; each run must
// match the expected outputs.
struct RunConfig {
  int threads;
  Schedule schedule;
  int tiles_per_op;
};

std::vector<RunConfig> tile_configs() {
  std::vector<RunConfig> v;
  for (int threads : {1, 2, 3, 8})
    for (Schedule s : {Schedule::aspen, Schedule::barrier})
      for (int tiles : {0, 4}) v.push_back({threads, s, tiles});
  return v;
}

std::string describe(const RunConfig& c) {
  return "tiles: " + std::to_string(c.threads) + " threads, " + (c.schedule == Schedule::aspen ? "aspen" : "barrier") +
         ", tiles_per_op " + std::to_string(c.tiles_per_op) + ": ";
}

CaseResult run_case(const fs::path& dir, bool tiles) {
  CaseResult r;
  r.op = "(not-imported)";
  try {
    Graph imported;
    try {
      imported = load_onnx((dir / "model.onnx").string());
    } catch (const Error& e) {
      // The model could not even be imported: count it under the first op type named in it.
      r.outcome = e.unsupported() ? Outcome::skip : Outcome::fail;
      r.detail = e.what();
      std::string msg = e.what();
      auto at = msg.find("unsupported ops:\n  ");
      if (at != std::string::npos) r.op = msg.substr(at + 19, msg.find(' ', at + 19) - (at + 19));
      else if (msg.find("is a sequence, map or optional") != std::string::npos) r.op = "(sequence/optional)";
      return r;
    }
    r.op = case_op(imported);
    if (std::string why = defective_data(dir.filename().string()); !why.empty()) {
      r.outcome = Outcome::skip;
      r.detail = why;
      return r;
    }
    std::vector<std::string> input_names;
    for (const auto& in : imported.inputs) input_names.push_back(in.name);
    std::vector<fs::path> sets;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
    std::sort(sets.begin(), sets.end());
    Model model = model_from_graph(imported);
    for (const auto& set : sets) {
      ValueMap inputs;
      auto in_files = numbered(set, "input_");
      if (in_files.size() != input_names.size())
        throw Error("test data has " + std::to_string(in_files.size()) + " inputs, the model " +
                    std::to_string(input_names.size()));
      for (size_t i = 0; i < in_files.size(); ++i)
        inputs[input_names[i]] = as_declared(load_value_pb(in_files[i].string(), imported.inputs[i]), imported.inputs[i].dtype);
      std::vector<std::pair<std::string, ValueMap>> results{{"", model.run_reference_values(inputs)}};
      if (tiles)
        for (const RunConfig& c : tile_configs()) {
          Engine engine({.threads = c.threads, .pin = false});
          Session session(engine, model_from_graph(imported), {.schedule = c.schedule, .tiles_per_op = c.tiles_per_op});
          results.emplace_back(describe(c), session.run_values(inputs));
        }
      auto out_files = numbered(set, "output_");
      for (size_t i = 0; i < out_files.size() && i < imported.outputs.size(); ++i) {
        Value want = as_declared(load_value_pb(out_files[i].string(), imported.outputs[i]), imported.outputs[i].dtype);
        for (const auto& [how, outputs] : results) {
          std::string diff = compare_values(outputs.at(imported.outputs[i].name), want);
          if (!diff.empty()) {
            r.outcome = Outcome::fail;
            r.detail = how + set.filename().string() + " output '" + imported.outputs[i].name + "': " + diff;
            return r;
          }
        }
      }
    }
    r.outcome = Outcome::pass;
  } catch (const Error& e) {
    r.outcome = e.unsupported() ? Outcome::skip : Outcome::fail;
    r.detail = e.what();
  } catch (const std::exception& e) {
    r.outcome = Outcome::fail;
    r.detail = std::string("unexpected exception: ") + e.what();
  }
  return r;
}

// One case running in a child process with a time limit; a crash or hang becomes a failure.
struct Child {
  pid_t pid = -1;
  int fd = -1;
  CaseResult inline_result;  // where no child could be started: the case ran here
};

Child start_isolated(const fs::path& dir, int timeout_s, bool tiles) {
  int fds[2];
  if (pipe(fds) != 0) return {-1, -1, run_case(dir, tiles)};
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return {-1, -1, run_case(dir, tiles)};
  }
  if (pid == 0) {
    close(fds[0]);
    alarm(static_cast<unsigned>(timeout_s));
    CaseResult r = run_case(dir, tiles);
    std::string msg = std::to_string(static_cast<int>(r.outcome)) + "\n" + r.op + "\n" + r.detail;
    size_t off = 0;
    while (off < msg.size()) {
      ssize_t n = write(fds[1], msg.data() + off, msg.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  return {pid, fds[0], {}};
}

CaseResult finish_isolated(Child& child) {
  if (child.pid < 0) return child.inline_result;
  std::string msg;
  char buf[4096];
  ssize_t n;
  while ((n = read(child.fd, buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(n));
  close(child.fd);
  int status = 0;
  waitpid(child.pid, &status, 0);
  CaseResult r;
  auto a = msg.find('\n'), b = a == std::string::npos ? a : msg.find('\n', a + 1);
  if (b == std::string::npos) {
    r.op = "?";
    r.detail = WIFSIGNALED(status) ? std::string("crashed or timed out: ") + strsignal(WTERMSIG(status)) : "no result";
    return r;
  }
  r.outcome = static_cast<Outcome>(std::stoi(msg.substr(0, a)));
  r.op = msg.substr(a + 1, b - a - 1);
  r.detail = msg.substr(b + 1);
  return r;
}

struct Counts {
  int pass = 0, fail = 0, skip = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::string data = "/usr/share/libonnx-testdata/data/node";
  std::string filter;
  bool verbose = false;
  int timeout_s = 60;
  bool tiles = false;
  int jobs = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--data" && i + 1 < argc) data = argv[++i];
    else if (a == "--filter" && i + 1 < argc) filter = argv[++i];
    else if (a == "--timeout" && i + 1 < argc) timeout_s = std::stoi(argv[++i]);
    else if (a == "--verbose" || a == "-v") verbose = true;
    else if (a == "--tiles") tiles = true;
    else if (a == "--jobs" && i + 1 < argc) jobs = std::max(1, std::stoi(argv[++i]));
    else {
      std::cout << "usage: grove_conformance [--data DIR] [--filter SUBSTRING] [--timeout SECONDS] [--tiles] [--jobs N] [--verbose]\n"
                   "Runs the ONNX node tests in DIR (default " << data << ") through grove's reference executor.\n"
                   "--tiles also runs every case through the tile runtime at 1, 2, 3 and 8 workers, both schedules.\n"
                   "--jobs runs that many cases at once, each in its own process (default 1).\n"
                   "Prints pass/fail/skip per op and every skip reason; exits 1 if any case fails.\n";
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  if (!fs::is_directory(data)) {
    std::cerr << "grove_conformance: no test data at " << data << " (apt-get install libonnx-testdata)\n";
    return 2;
  }
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(data))
    if (e.is_directory() && fs::exists(e.path() / "model.onnx") &&
        e.path().filename().string().find(filter) != std::string::npos)
      cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  // The tables built on first use (ONNX's operator schema registry: 70 % of a small case's
  // instructions under callgrind) are built here once, before the children fork, instead of
  // once in every child.
  for (const fs::path& dir : cases) {
    try {
      (void)load_onnx((dir / "model.onnx").string());
      break;
    } catch (const Error&) {
    }
  }

  std::map<std::string, Counts> per_op;
  std::map<std::string, std::vector<std::string>> skips_by_op;
  std::vector<std::string> failures;
  Counts total;
  // Up to `jobs` cases run at once; their results are taken in the cases' order.
  std::deque<Child> running;
  size_t next = 0;
  for (const auto& dir : cases) {
    while (next < cases.size() && running.size() < static_cast<size_t>(jobs))
      running.push_back(start_isolated(cases[next++], timeout_s, tiles));
    CaseResult r = finish_isolated(running.front());
    running.pop_front();
    std::string name = dir.filename().string();
    Counts& c = per_op[r.op];
    std::string one_line = r.detail;
    std::replace(one_line.begin(), one_line.end(), '\n', ' ');
    switch (r.outcome) {
      case Outcome::pass: ++c.pass; ++total.pass; break;
      case Outcome::fail: ++c.fail; ++total.fail; failures.push_back(name + ": " + r.detail); break;
      case Outcome::skip: ++c.skip; ++total.skip; skips_by_op[r.op].push_back(name + ": " + one_line); break;
    }
    if (verbose) {
      const char* tag = r.outcome == Outcome::pass ? "PASS" : r.outcome == Outcome::fail ? "FAIL" : "SKIP";
      std::cout << tag << " " << name << (r.detail.empty() ? "" : "  " + r.detail) << "\n";
    }
  }

  std::printf("\n%-28s %6s %6s %6s\n", "op", "passed", "failed", "skipped");
  for (const auto& [op, c] : per_op) std::printf("%-28s %6d %6d %6d\n", op.c_str(), c.pass, c.fail, c.skip);
  std::printf("\nskipped cases (op, dtype or attribute grove does not claim):\n");
  for (const auto& [op, list] : skips_by_op)
    for (const auto& s : list) std::printf("  [%s] %s\n", op.c_str(), s.c_str());
  if (!failures.empty()) {
    std::printf("\nfailed cases:\n");
    for (const auto& f : failures) std::printf("  %s\n", f.c_str());
  }
  std::printf("\nconformance: %d passed, %d failed, %d skipped\n", total.pass, total.fail, total.skip);
  return total.fail == 0 ? 0 : 1;
}
