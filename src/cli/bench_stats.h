#pragma once
// Statistics shared by the `grove bench` modes and `grove load`.
#include <vector>

namespace grove::cli {

double percentile(std::vector<double> v, double p);  // nearest rank, p in [0, 100]; 0 when empty
double mean(const std::vector<double>& v);
double peak_rss_mb();                                 // this process's peak resident set, MB

}  // namespace grove::cli
