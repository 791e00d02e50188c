#include "tune/perf_select.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "graph/error.h"
#include "tune/record.h"

namespace grove::tune {
namespace {

constexpr const char* kHeader =
    "machine,threads,node,batch,cin,cout,in_h,in_w,out_h,out_w,kernel_h,kernel_w,stride_h,stride_w,group,primitive,"
    "extent,tiles,us";

// Splits one CSV line; fields in double quotes may hold commas.
std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (char ch : line) {
    if (ch == '"') quoted = !quoted;
    else if (ch == ',' && !quoted) out.emplace_back();
    else out.back() += ch;
  }
  return out;
}

}  // namespace

std::vector<ProfileRow> read_profile_csv(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error(path + ": cannot open the profile dataset");
  std::string line;
  int line_no = 1;
  if (!std::getline(f, line) || line != kHeader) throw Error(path + ": line 1 is not the header grove tune --dataset writes");
  std::vector<ProfileRow> rows;
  while (std::getline(f, line)) {
    ++line_no;
    if (line.empty()) continue;
    const std::vector<std::string> v = fields(line);
    auto fail = [&](const std::string& why) { return Error(path + ": line " + std::to_string(line_no) + ": " + why); };
    if (v.size() != 19) throw fail("has " + std::to_string(v.size()) + " fields, not 19");
    auto integer = [&](size_t i) {
      char* end = nullptr;
      const long long x = std::strtoll(v[i].c_str(), &end, 10);
      if (v[i].empty() || *end || x < 0 || x > (int64_t{1} << 40)) throw fail("'" + v[i] + "' is not a size");
      return int64_t(x);
    };
    ProfileRow r;
    r.machine = v[0];
    r.threads = static_cast<int>(std::min<int64_t>(integer(1), 1 << 16));
    r.config = {integer(3), integer(4), integer(5), integer(6), integer(7), integer(8),
                integer(9), integer(10), integer(11), integer(12), integer(13), integer(14)};
    r.primitive = v[15];
    std::istringstream dims(v[16]);
    for (std::string d; std::getline(dims, d, 'x');) {
      char* end = nullptr;
      const long long x = std::strtoll(d.c_str(), &end, 10);
      if (d.empty() || *end || x < 0) throw fail("'" + v[16] + "' is not a tile extent");
      r.extent.push_back(x);
    }
    r.tiles = integer(17);
    char* end = nullptr;
    r.us = std::strtod(v[18].c_str(), &end);
    if (v[18].empty() || *end || !std::isfinite(r.us) || r.us <= 0) throw fail("'" + v[18] + "' is not a time");
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<PerfSample> samples_from_rows(const std::vector<ProfileRow>& rows) {
  const auto& primitives = model_primitives();
  std::map<std::vector<int64_t>, PerfSample> by_key;
  for (const ProfileRow& r : rows) {
    size_t k = 0;
    while (k < primitives.size() && primitives[k] != r.primitive) ++k;
    if (k == primitives.size()) continue;
    const ConvConfig& c = r.config;
    std::vector<int64_t> key = {c.batch, c.cin, c.cout, c.in_h, c.in_w, c.out_h, c.out_w, c.kernel_h,
                                c.kernel_w, c.stride_h, c.stride_w, c.group, r.threads, r.tiles};
    key.insert(key.end(), r.extent.begin(), r.extent.end());
    PerfSample& s = by_key[key];
    if (s.features.empty()) {
      s.features = conv_features(c, r.extent, r.tiles, r.threads);
      s.times.assign(primitives.size(), std::numeric_limits<double>::quiet_NaN());
    }
    // A layer repeated in a model (ResNet's blocks) is one configuration: keep the faster
    // measurement, the one less disturbed.
    if (std::isnan(s.times[k]) || r.us < s.times[k]) s.times[k] = r.us;
  }
  std::vector<PerfSample> out;
  for (auto& [key, s] : by_key) out.push_back(std::move(s));
  return out;
}

std::string perf_model_path() {
  const std::string dir = machine_tuning_dir();
  return dir.empty() ? "" : dir + "/conv.perfmodel";
}

double predicted_cost(double total_us, int64_t tiles, int threads) {
  return total_us / std::max(1, threads) + total_us / double(std::max<int64_t>(tiles, 1));
}

std::vector<NodeChoice> predicted_choices(const Plan& rules, const PerfModel& model, double keep_share) {
  const auto& primitives = model_primitives();
  if (model.outputs() != primitives.size()) throw Error("performance model: it prices " + std::to_string(model.outputs()) +
                                                        " primitives, this grove " + std::to_string(primitives.size()));
  const int threads = rules.options.threads;
  auto price = [&](const ConvConfig& c, const ConvCandidate& k) {
    size_t p = 0;
    while (p < primitives.size() && primitives[p] != k.primitive) ++p;
    const std::vector<double> t = model.predict(conv_features(c, k.extent, k.tiles, threads));
    return predicted_cost(t.at(p), k.tiles, threads);
  };
  std::vector<NodeChoice> choices;
  for (size_t n = 0; n < rules.graph.nodes.size(); ++n) {
    ConvConfig c;
    if (!tunable_conv(rules, n, &c)) continue;
    const ConvCandidate rule = rule_choice(rules, n);
    // A rule's primitive the model does not price (the direct kernel) stays: nothing to weigh it against.
    if (!std::count(primitives.begin(), primitives.end(), rule.primitive)) continue;
    double best = price(c, rule) * (1 - keep_share);
    const ConvCandidate* pick = nullptr;
    const std::vector<ConvCandidate> candidates = conv_candidates(rules, n);
    // Only grids of the rule's tile count: the model prices a node alone, and a change of tile
    // count changes how layers overlap, which grove tune's whole-model check catches and the
    // model cannot (on ResNet-50 at 2 threads such choices measured 5% slower).
    for (const ConvCandidate& k : candidates)
      if (k.tiles == rule.tiles && std::count(primitives.begin(), primitives.end(), k.primitive))  // ones it prices
        if (const double cost = price(c, k); cost < best) best = cost, pick = &k;
    if (pick && !(pick->primitive == rule.primitive && pick->extent == rule.extent))
      choices.push_back({rules.graph.nodes[n].name, pick->primitive, pick->extent});
  }
  return choices;
}

}  // namespace grove::tune
