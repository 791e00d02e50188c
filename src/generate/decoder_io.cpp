// DecoderIo::find: the decoder interface from the input and output names, as the exporters
// write them: past_key_values.N.key -> present.N.key (Hugging Face / optimum), past_N ->
// present_N, past.N -> present.N.
#include <algorithm>

#include "grove/error.h"
#include "grove/generate.h"

namespace grove {

namespace {

const ValueSpec* named(const std::vector<ValueSpec>& specs, const std::string& name) {
  for (const ValueSpec& s : specs)
    if (s.name == name) return &s;
  return nullptr;
}

// The present output a past input pairs with, or "" when none of the spellings matches.
std::string present_for(const std::string& past, const std::vector<ValueSpec>& outputs) {
  std::vector<std::string> candidates;
  for (const char* from : {"past_key_values", "past"}) {
    const size_t at = past.find(from);
    if (at == std::string::npos) continue;
    std::string name = past;
    name.replace(at, std::string(from).size(), "present");
    candidates.push_back(name);
  }
  for (const std::string& c : candidates)
    if (named(outputs, c)) return c;
  return "";
}

// The positions axis of a cache input: its one symbolic dimension after the batch axis.
int positions_axis(const ValueSpec& spec) {
  if (spec.dims.size() < 3)
    throw Error("cache input '" + spec.name + "' has rank " + std::to_string(spec.dims.size()) +
                "; a decoder's past is [batch, heads, positions, head dim]");
  int axis = -1;
  for (size_t d = 1; d < spec.dims.size(); ++d) {
    if (spec.dims[d] >= 0) continue;
    if (axis >= 0)
      throw Error("cache input '" + spec.name + "' has several symbolic dimensions after the batch; "
                  "which one holds the positions is ambiguous");
    axis = static_cast<int>(d);
  }
  if (axis < 0) throw Error("cache input '" + spec.name + "' has no symbolic positions dimension");
  return axis;
}

}  // namespace

DecoderIo DecoderIo::find(const std::vector<ValueSpec>& inputs, const std::vector<ValueSpec>& outputs) {
  DecoderIo io;
  if (!named(inputs, "input_ids")) throw Error("not a decoder: the model has no input named 'input_ids'");
  io.input_ids = "input_ids";
  if (named(inputs, "attention_mask")) io.attention_mask = "attention_mask";
  if (named(inputs, "position_ids")) io.position_ids = "position_ids";
  for (const ValueSpec& in : inputs) {
    if (in.name.find("past") == std::string::npos) continue;
    const std::string present = present_for(in.name, outputs);
    if (present.empty())
      throw Error("cache input '" + in.name + "' has no matching output (expected 'present...' in its place)");
    if (in.dtype != named(outputs, present)->dtype)
      throw Error("cache input '" + in.name + "' and output '" + present + "' differ in element type");
    io.cache.push_back({in.name, present, positions_axis(in)});
  }
  if (io.cache.empty())
    throw Error("not a decoder with a cache: no input named 'past...' (past_key_values.N.key, past_N, past.N)");
  for (const ValueSpec& in : inputs) {
    const bool known = in.name == io.input_ids || in.name == io.attention_mask || in.name == io.position_ids ||
                       std::any_of(io.cache.begin(), io.cache.end(), [&](const CacheEntry& c) { return c.past == in.name; });
    if (!known) throw Error("decoder input '" + in.name + "' is neither the ids, the mask, the positions nor a cache input");
  }
  if (named(outputs, "logits")) {
    io.logits = "logits";
  } else {
    for (const ValueSpec& out : outputs)
      if (std::none_of(io.cache.begin(), io.cache.end(), [&](const CacheEntry& c) { return c.present == out.name; })) {
        io.logits = out.name;
        break;
      }
    if (io.logits.empty()) throw Error("decoder has no logits output (every output is a cache output)");
  }
  return io;
}

}  // namespace grove
