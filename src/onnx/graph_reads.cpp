#include "onnx/graph_reads.h"

namespace grove {

void collect_reads(const onnx::GraphProto& g, std::set<std::string>& read) {
  for (const auto& n : g.node()) {
    for (const auto& in : n.input()) read.insert(in);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) collect_reads(a.g(), read);
      for (const auto& sub : a.graphs()) collect_reads(sub, read);
    }
  }
}

}  // namespace grove
