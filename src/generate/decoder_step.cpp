#include "generate/decoder_step.h"

#include <algorithm>
#include <optional>
#include <set>

#include "graph/graph.h"
#include "ops/op_names.h"
#include "runtime/model.h"
#include "runtime/session.h"

namespace grove::generate {

namespace {

// Per cache entry, the value `new` when the entry's present is made by a top-level
// Concat(past, new) along the cache axis, `new` being a node's output that is neither a graph
// input nor output; nullopt when any present is not.
std::optional<std::vector<std::string>> new_parts(const Graph& g, const DecoderIo& io) {
  std::set<std::string> outputs;
  for (const ValueDecl& o : g.outputs) outputs.insert(o.name);
  std::set<std::string> produced;
  for (const Node& n : g.nodes) produced.insert(n.outputs.begin(), n.outputs.end());
  std::vector<std::string> parts;
  for (const DecoderIo::CacheEntry& c : io.cache) {
    const auto made = std::find_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) {
      return std::find(n.outputs.begin(), n.outputs.end(), c.present) != n.outputs.end();
    });
    if (made == g.nodes.end()) return std::nullopt;
    const Node& n = *made;
    if (n.op_type != kConcat || !n.domain.empty() || n.inputs.size() != 2 || n.inputs[0] != c.past) return std::nullopt;
    const ValueDecl* past = g.find_input(c.past);
    const int64_t axis = n.attr_int("axis", 0);
    if (!past || (axis != c.axis && axis + static_cast<int64_t>(past->dims.size()) != c.axis)) return std::nullopt;
    const std::string& fresh = n.inputs[1];
    if (!produced.count(fresh) || outputs.count(fresh) || std::count(parts.begin(), parts.end(), fresh))
      return std::nullopt;
    parts.push_back(fresh);
  }
  return parts;
}

}  // namespace

DecoderStep decoder_step(Session& session, const DecoderIo& io) {
  const Graph& g = imported_graph(session.model());
  const std::optional<std::vector<std::string>> parts = new_parts(g, io);
  if (!parts) return {&session, std::vector<std::string>(io.cache.size())};
  Session& step = derived_session(session, "decoder_step", [&] {
    Graph copy = g;  // initializers share their buffers: no weights copied
    for (size_t i = 0; i < io.cache.size(); ++i)
      for (ValueDecl& o : copy.outputs)
        if (o.name == io.cache[i].present) {
          o.name = (*parts)[i];
          o.dims.clear();
          o.has_shape = false;  // [batch, heads, new tokens, head dim], whatever the model declares
        }
    return model_from_graph(std::move(copy), {}, session.model().limits());
  });
  return {&step, *parts};
}

}  // namespace grove::generate
