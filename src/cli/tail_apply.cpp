#include "cli/tail_apply.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "cli/format.h"
#include "graph/error.h"
#include "onnx/save_rewritten.h"
#include "runtime/trace.h"

namespace grove::cli {

void check_writable(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw Error("--apply: '" + path + "' is a directory");
  const bool existed = fs::exists(path, ec);
  // Opened for appending, so an existing file is left as it is until the model is written.
  std::ofstream probe(path, std::ios::binary | std::ios::app);
  if (!probe) throw Error("--apply: cannot write '" + path + "': " + std::strerror(errno));
  probe.close();
  if (!existed) fs::remove(path, ec);
}

std::vector<WidthSuggestion> parse_widths(const std::vector<std::string>& widths, const Graph& imported) {
  const std::vector<ChannelLayer> layers = channel_layers(imported);
  std::vector<WidthSuggestion> out;
  for (const std::string& entry : widths) {
    const auto eq = entry.rfind('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size())
      throw Error("--widths: '" + entry + "' is not NAME=CHANNELS");
    const std::string name = entry.substr(0, eq), count = entry.substr(eq + 1);
    char* end = nullptr;
    const long long channels = std::strtoll(count.c_str(), &end, 10);
    if (*end != '\0' || channels < 1 || channels > (1 << 20))
      throw Error("--widths: '" + count + "' is not a channel count from 1 to 1048576 (in '" + entry + "')");
    auto it = std::find_if(layers.begin(), layers.end(), [&](const ChannelLayer& l) { return l.name == name; });
    if (it == layers.end()) {
      std::string known;
      for (size_t i = 0; i < layers.size() && i < 12; ++i) known += (i ? ", " : "") + layers[i].name;
      throw Error("--widths: no layer named '" + name + "' (layers: " + known + (layers.size() > 12 ? ", ..." : "") + ")");
    }
    out.push_back({name, it->channels, channels, channels < it->channels ? "prune (--widths)" : "grow (--widths)"});
  }
  return out;
}

AppliedWidths apply_widths(const TailOptions& o, const Graph& imported, const std::vector<WidthSuggestion>& asked,
                           std::FILE* out) {
  std::vector<LayerResize> wanted;
  for (const WidthSuggestion& s : asked) wanted.push_back({s.layer, s.to});
  ResizedGraph resized = resize_layers(imported, wanted, o.seed);
  save_rewritten(o.model, imported, resized.graph, o.apply);

  AppliedWidths a{asked, resized.layers};
  int changed = 0;
  for (const ResizeOutcome& r : a.outcomes) changed += r.skipped.empty() && r.from != r.to;
  std::fprintf(out, "wrote %s: %d of %zu layers resized\n", o.apply.c_str(), changed, asked.size());
  for (size_t i = 0; i < asked.size(); ++i) {
    const ResizeOutcome& r = a.outcomes[i];
    if (r.skipped.empty())
      std::fprintf(out, "  %-40s %5lld -> %-5lld %s\n", r.layer.c_str(), (long long)r.from, (long long)r.to,
                   asked[i].why.c_str());
    else
      std::fprintf(out, "  %-40s %5lld    kept: %s\n", r.layer.c_str(), (long long)r.from, r.skipped.c_str());
  }
  return a;
}

std::string applied_json(const TailOptions& o, const AppliedWidths& a) {
  std::string s = "{\"out\": " + json_quote(o.apply) + ", \"layers\": [";
  for (size_t i = 0; i < a.outcomes.size(); ++i) {
    const ResizeOutcome& r = a.outcomes[i];
    s += strf("%s{\"name\": %s, \"from\": %lld, \"to\": %lld, \"why\": %s, \"skipped\": %s}", i ? ", " : "",
              json_quote(r.layer).c_str(), (long long)r.from, (long long)r.to, json_quote(a.asked[i].why).c_str(),
              json_quote(r.skipped).c_str());
  }
  return s + "]}";
}

}  // namespace grove::cli
