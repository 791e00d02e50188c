#include "dynamic/subnet_spec.h"

#include <charconv>
#include <cmath>
#include <set>
#include <sstream>

#include "graph/error.h"

namespace grove {
namespace {

std::vector<std::string> split_words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

double parse_number(const std::string& text, const std::string& what) {
  double v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end || !std::isfinite(v)) throw Error(what + ": '" + text + "' is not a number");
  return v;
}

void check_ratio(double r, const std::string& where) {
  if (!(r > 0 && r <= 1)) throw Error(where + ": ratio " + std::to_string(r) + " is outside (0, 1]");
}

SubnetSpec parse_subnet(const std::vector<std::string>& words, const std::string& where) {
  if (words.size() < 3) throw Error(where + ": expected `subnet NAME ratio=R` or `subnet NAME LAYER=CHANNELS ...`");
  SubnetSpec s;
  s.name = words[1];
  bool has_ratio = false;
  for (size_t i = 2; i < words.size(); ++i) {
    const auto eq = words[i].find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == words[i].size())
      throw Error(where + ": '" + words[i] + "' is not KEY=VALUE");
    const std::string key = words[i].substr(0, eq), value = words[i].substr(eq + 1);
    const double v = parse_number(value, where + ": " + key);
    if (key == "ratio") {
      check_ratio(v, where);
      s.ratio = v;
      has_ratio = true;
    } else if (key == "accuracy") {
      if (v < 0 || v > 1) throw Error(where + ": accuracy " + value + " is outside [0, 1]");
      s.accuracy = v;
    } else {
      if (v < 1 || v != std::floor(v) || v > 1e9)
        throw Error(where + ": layer '" + key + "' keeps " + value + " channels; a count must be a whole number >= 1");
      if (!s.channels.emplace(key, static_cast<int64_t>(v)).second)
        throw Error(where + ": layer '" + key + "' is given twice");
    }
  }
  if (has_ratio && !s.channels.empty()) throw Error(where + ": give a ratio or per-layer channels, not both");
  if (!has_ratio && s.channels.empty()) throw Error(where + ": sub-net '" + s.name + "' gives neither a ratio nor channels");
  return s;
}

}  // namespace

DynamicSpec parse_dynamic_spec(const std::string& text) {
  DynamicSpec spec;
  std::set<std::string> names;
  std::string line;
  int number = 0;
  auto handle = [&](const std::string& l) {
    ++number;
    const auto words = split_words(l);
    if (words.empty()) return;
    const std::string where = std::string(kSubnetsMetadataKey) + " line " + std::to_string(number);
    if (words[0] == "exempt") {
      spec.exempt_given = true;
      spec.exempt.insert(spec.exempt.end(), words.begin() + 1, words.end());
    } else if (words[0] == "subnet") {
      SubnetSpec s = parse_subnet(words, where);
      if (!names.insert(s.name).second) throw Error(where + ": sub-net '" + s.name + "' is defined twice");
      spec.subnets.push_back(std::move(s));
    } else {
      throw Error(where + ": unknown statement '" + words[0] + "' (expected `exempt` or `subnet`)");
    }
  };
  for (char c : text) {
    if (c == '\n' || c == ';') {
      handle(line);
      line.clear();
    } else {
      line += c;
    }
  }
  handle(line);
  if (spec.subnets.empty()) throw Error(std::string(kSubnetsMetadataKey) + ": no `subnet` line");
  return spec;
}

DynamicSpec uniform_dynamic_spec(const std::vector<double>& ratios) {
  DynamicSpec spec;
  std::set<std::string> names;
  for (double r : ratios) {
    check_ratio(r, "sub-net");
    std::ostringstream name;
    name << r;
    if (!names.insert(name.str()).second) throw Error("sub-net ratio " + name.str() + " is given twice");
    spec.subnets.push_back(SubnetSpec{name.str(), r, {}, -1});
  }
  if (spec.subnets.empty()) throw Error("no sub-net ratio given");
  return spec;
}

}  // namespace grove
