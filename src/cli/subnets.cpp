#include "cli/subnets.h"

#include "cli/format.h"
#include "dynamic/subnet_spec.h"
#include "graph/error.h"

namespace grove::cli {
namespace {

std::vector<double> parse_ratios(const std::string& text, const std::string& path) {
  std::vector<double> ratios;
  size_t at = 0;
  while (true) {
    const size_t end = text.find(',', at);
    const std::string item = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    size_t used = 0;
    double r = 0;
    try {
      r = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size())
      throw Error("--subnet " + text + ": " + path + " is not a dynamic model (no metadata_props key '" +
                  kSubnetsMetadataKey + "'), so --subnet takes width ratios to slice it at, e.g. 0.5 or 0.25,0.5,1");
    ratios.push_back(r);
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return ratios;
}

}  // namespace

SubnetPick open_subnets(Engine& engine, const Graph& imported, const std::string& path, const SessionOptions& options,
                        const std::string& text) {
  SubnetPick pick;
  if (!imported.metadata.count(kSubnetsMetadataKey)) {
    const std::vector<double> ratios = text == "all" ? std::vector<double>{0.25, 0.5, 0.75, 1.0} : parse_ratios(text, path);
    pick.session = std::make_unique<DynamicSession>(engine, path, options, ratios);
  } else {
    pick.session = std::make_unique<DynamicSession>(engine, path, options);
  }
  const auto& subnets = pick.session->subnets();
  if (text == "all" || !imported.metadata.count(kSubnetsMetadataKey)) {
    for (size_t i = 0; i < subnets.size(); ++i) pick.indices.push_back(static_cast<int>(i));
    return pick;
  }
  const int i = pick.session->find(text);
  if (i < 0) {
    std::string names;
    for (const auto& s : subnets) names += (names.empty() ? "" : ", ") + s.name;
    throw Error("--subnet " + text + ": " + path + " has no such sub-net (it has " + names + "; or give `all`)");
  }
  pick.indices.push_back(i);
  return pick;
}

std::string describe_subnet(const SubnetInfo& s) {
  std::string text = s.name + " (width " + strf("%.2f", s.ratio);
  if (s.flops > 0) text += ", " + strf("%.3g", static_cast<double>(s.flops) / 1e6) + " MFLOP";
  if (s.accuracy >= 0) text += ", accuracy " + strf("%.1f%%", 100 * s.accuracy);
  return text + ")";
}

}  // namespace grove::cli
