#include "tune/layout_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "graph/error.h"
#include "tune/csv_fields.h"

namespace grove::tune {
namespace {

constexpr const char* kLayoutHeader = "machine,threads,change,batch,c,h,w,us";

}  // namespace

const std::vector<std::string>& layout_changes() {
  static const std::vector<std::string> names = {"nchw_to_nhwc",    "nhwc_to_nchw",    "nchw_to_blocked",
                                                 "blocked_to_nchw", "nhwc_to_blocked", "blocked_to_nhwc"};
  return names;
}

int layout_change(ValueLayout from, ValueLayout to) {
  using L = ValueLayout;
  if (from == to) return -1;
  if (from == L::nchw) return to == L::channels_last ? 0 : 2;
  if (to == L::nchw) return from == L::channels_last ? 1 : 3;
  return from == L::channels_last ? 4 : 5;
}

std::vector<double> layout_features(const Shape& nchw, int threads) {
  auto dim = [&](size_t i) { return double(std::max<int64_t>(i < nchw.size() ? nchw[i] : 1, 1)); };
  const double n = dim(0), c = dim(1), plane = dim(2) * dim(3);
  return {std::log2(n * c * plane), std::log2(c), std::log2(plane), std::log2(double(std::max(threads, 1)))};
}

void append_layout_rows(const std::string& path, const std::vector<LayoutRow>& rows) {
  const bool fresh = !std::ifstream(path).good();
  std::ofstream f(path, std::ios::app);
  if (!f) throw Error(path + ": cannot write the layout dataset");
  if (fresh) f << kLayoutHeader << "\n";
  for (const LayoutRow& r : rows) {
    std::string machine = r.machine;
    for (char& ch : machine)
      if (ch == '"') ch = '\'';
    f << '"' << machine << "\"," << r.threads << ',' << r.change << ',' << r.shape.at(0) << ',' << r.shape.at(1) << ','
      << r.shape.at(2) << ',' << r.shape.at(3) << ',' << r.us << "\n";
  }
}

std::vector<LayoutRow> read_layout_csv(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error(path + ": cannot open the layout dataset");
  std::string line;
  int line_no = 1;
  if (!std::getline(f, line) || line != kLayoutHeader)
    throw Error(path + ": line 1 is not the header grove tune --sample-layouts writes");
  std::vector<LayoutRow> rows;
  while (std::getline(f, line)) {
    ++line_no;
    if (line.empty()) continue;
    const std::vector<std::string> v = csv_fields(line);
    auto fail = [&](const std::string& why) { return Error(path + ": line " + std::to_string(line_no) + ": " + why); };
    if (v.size() != 8) throw fail("has " + std::to_string(v.size()) + " fields, not 8");
    auto integer = [&](size_t i) {
      char* end = nullptr;
      const long long x = std::strtoll(v[i].c_str(), &end, 10);
      if (v[i].empty() || *end || x < 1 || x > (int64_t{1} << 40)) throw fail("'" + v[i] + "' is not a size");
      return int64_t(x);
    };
    LayoutRow r;
    r.machine = v[0];
    r.threads = static_cast<int>(std::min<int64_t>(integer(1), 1 << 16));
    r.change = v[2];
    if (!std::count(layout_changes().begin(), layout_changes().end(), r.change)) throw fail("'" + v[2] + "' is not a layout change");
    r.shape = {integer(3), integer(4), integer(5), integer(6)};
    char* end = nullptr;
    r.us = std::strtod(v[7].c_str(), &end);
    if (v[7].empty() || *end || !std::isfinite(r.us) || r.us <= 0) throw fail("'" + v[7] + "' is not a time");
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<PerfSample> layout_samples(const std::vector<LayoutRow>& rows) {
  std::map<std::pair<Shape, int>, PerfSample> by_key;
  const std::vector<std::string>& names = layout_changes();
  for (const LayoutRow& r : rows) {
    PerfSample& s = by_key[{r.shape, r.threads}];
    if (s.times.empty()) {
      s.features = layout_features(r.shape, r.threads);
      s.times.assign(names.size(), std::numeric_limits<double>::quiet_NaN());
    }
    const size_t k = static_cast<size_t>(std::find(names.begin(), names.end(), r.change) - names.begin());
    s.times[k] = r.us;
  }
  std::vector<PerfSample> out;
  for (auto& [key, s] : by_key) out.push_back(std::move(s));
  return out;
}

}  // namespace grove::tune
