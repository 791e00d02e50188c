#pragma once
// `grove tail --apply OUT.onnx`: the model with its layers set to the widths `grove tail`
// suggests (or --widths names), rewritten by dynamic/resize_layers.h and written as ONNX, with
// one line per layer resized or left as it is.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "dynamic/resize_layers.h"

namespace grove::cli {

struct WidthSuggestion {
  std::string layer;
  int64_t channels = 0, to = 0;
  std::string why;  // "grow: free, ...", "prune: ...", "--widths"
};

// Throws Error when `path` cannot be written: checked before minutes of timing, not after.
void check_writable(const std::string& path);

// --widths NAME=C entries as suggestions; an unknown layer or a bad count is an Error.
std::vector<WidthSuggestion> parse_widths(const std::vector<std::string>& widths, const Graph& imported);

struct AppliedWidths {
  std::vector<WidthSuggestion> asked;
  std::vector<ResizeOutcome> outcomes;  // one per suggestion, in the same order
};

// Resizes, writes o.apply, and prints one line per suggestion to `out`.
AppliedWidths apply_widths(const TailOptions& o, const Graph& imported, const std::vector<WidthSuggestion>& asked,
                           std::FILE* out);

// {"out": ..., "layers": [{"name", "from", "to", "why", "skipped"}]}
std::string applied_json(const TailOptions& o, const AppliedWidths& a);

}  // namespace grove::cli
