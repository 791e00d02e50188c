#pragma once
// A model whose pruned conv runs on Winograd, and the stored machine probes that put it there
// on any CPU: for the pruning trial's tests (runtime/plan_trial.h) in the unit and CLI suites.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/cpu_info.h"
#include "onnx_builder.h"
#include "plan/feature_pruning.h"
#include "runtime/machine_probes.h"

namespace grove::test {

// A 32-channel 14x14 map "a" that the conv after it prunes by the model's metadata; `batch`
// images.
inline std::string pruned_winograd_model(int64_t batch) {
  OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {batch, 32, 14, 14}).output("y", onnx::TensorProto::FLOAT, {batch, 32, 14, 14});
  auto values = [](int64_t n, uint32_t seed) {
    std::vector<float> v(static_cast<size_t>(n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = float((i * 2654435761u + seed) % 2001) / 1000.0f - 1.0f;
    return v;
  };
  b.initializer_f32("w0", {32, 32, 3, 3}, values(32 * 32 * 9, 1));
  b.initializer_f32("w1", {32, 32, 3, 3}, values(32 * 32 * 9, 2));
  OnnxBuilder::attr_ints(b.node("Conv", {"x", "w0"}, {"c0"}, "conv0"), "pads", {1, 1, 1, 1});
  b.node("Relu", {"c0"}, {"a"}, "relu0");
  OnnxBuilder::attr_ints(b.node("Conv", {"a", "w1"}, {"y"}, "conv1"), "pads", {1, 1, 1, 1});
  auto* p = b.proto().add_metadata_props();
  p->set_key(kFeaturePruningKey);
  p->set_value("prune a channels=0.75");
  return b.bytes();
}

// This machine's probes as a stored file that says Winograd on 14x14 planes from 32 channels
// runs 100x faster than the row GEMM, so a pruned conv stays on Winograd whatever this CPU
// measures. (The header is machine_probes.cpp's; a new version there fails this test.)
inline void store_probes_for_winograd() {
  std::filesystem::create_directories(std::filesystem::path(machine_probes_path()).parent_path());
  std::ofstream(machine_probes_path()) << "grove machine probes 2\nmachine " << kernels::machine_key()
                                       << "\ntranspose_flops 32\nwinograd_nhwc_min_channels 32\n"
                                          "winograd_nhwc_small_planes 1\nwinograd_nhwc_small_plane_gain 100\n"
                                          "winograd_nhwc_small_plane_half_kept 0.5\n";
}

}  // namespace grove::test
