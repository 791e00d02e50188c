#pragma once
// The profile CSVs grove tune writes: one record per line, fields in double quotes may hold commas.
#include <string>
#include <vector>

namespace grove::tune {

inline std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (char ch : line) {
    if (ch == '"') quoted = !quoted;
    else if (ch == ',' && !quoted) out.emplace_back();
    else out.back() += ch;
  }
  return out;
}

}  // namespace grove::tune
