#pragma once
// The value names an ONNX graph's nodes read, their subgraphs' included: what the writers of
// ONNX files (onnx/save_rewritten.cpp, quantize/qdq_model.cpp) check before dropping an
// initializer.
#include <onnx/onnx_pb.h>

#include <set>
#include <string>

namespace grove {

void collect_reads(const onnx::GraphProto& g, std::set<std::string>& read);

}  // namespace grove
