#include "runtime/machine_probes.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kernels/cpu_info.h"
#include "kernels/move_cost.h"
#include "tune/record.h"

namespace grove {
namespace {

// The version counts changes to the kernels the probes time: a file of another version holds
// timings of kernels this grove no longer runs, so it is measured again. 2: the channels-last
// Winograd's V and M padded apart (its 14x14 layer runs about 1.2x faster, which moves the
// gain and half-kept ratio feature pruning compares with).
constexpr const char* kHeader = "grove machine probes 2";

// Reads what the file holds into `probes` (fields it lacks stay unmeasured). A file of another
// machine or version, or one that does not parse, is ignored and rewritten: it is a cache of
// measurements, never an input the user wrote.
bool read_stored(const std::string& path, MachineProbes& probes) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  if (!std::getline(in, line) || line != kHeader) return false;
  if (!std::getline(in, line) || line != "machine " + kernels::machine_key()) return false;
  MachineProbes read;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string key;
    double value = 0;
    if (!(fields >> key >> value)) return false;
    if (key == "move_flops") read.move_flops = value;
    else if (key == "amx_flop_cost") read.amx_flop_cost = value;
    else if (key == "bf16_dot_gain") read.bf16_dot_gain = value;
    else if (key == "transpose_flops") read.transpose_flops = value;
    else if (key == "winograd_nhwc_min_channels") {
      if (!read.winograd_nhwc) read.winograd_nhwc.emplace();
      read.winograd_nhwc->min_channels = static_cast<int64_t>(value);
    } else if (key == "winograd_nhwc_small_planes") {
      if (!read.winograd_nhwc) read.winograd_nhwc.emplace();
      read.winograd_nhwc->small_planes = value != 0;
    } else if (key == "winograd_nhwc_small_plane_gain") {
      if (!read.winograd_nhwc) read.winograd_nhwc.emplace();
      read.winograd_nhwc->small_plane_gain = value;
    } else if (key == "winograd_nhwc_small_plane_half_kept") {
      if (!read.winograd_nhwc) read.winograd_nhwc.emplace();
      read.winograd_nhwc->small_plane_half_kept = value;
    } else return false;
  }
  probes.move_flops = read.move_flops;
  probes.amx_flop_cost = read.amx_flop_cost;
  probes.bf16_dot_gain = read.bf16_dot_gain;
  probes.transpose_flops = read.transpose_flops;
  probes.winograd_nhwc = read.winograd_nhwc;
  return true;
}

// Written to a temporary file and renamed, so processes that store at once never leave a
// half-written file; the last one's complete file wins.
void write_stored(const std::string& path, const MachineProbes& p) {
  std::ostringstream out;
  out.precision(17);
  out << kHeader << "\nmachine " << kernels::machine_key() << "\n";
  if (p.move_flops > 0) out << "move_flops " << p.move_flops << "\n";
  if (p.amx_flop_cost > 0) out << "amx_flop_cost " << p.amx_flop_cost << "\n";
  if (p.bf16_dot_gain >= 0) out << "bf16_dot_gain " << p.bf16_dot_gain << "\n";
  if (p.transpose_flops > 0) out << "transpose_flops " << p.transpose_flops << "\n";
  if (p.winograd_nhwc)
    out << "winograd_nhwc_min_channels " << p.winograd_nhwc->min_channels << "\nwinograd_nhwc_small_planes "
        << (p.winograd_nhwc->small_planes ? 1 : 0) << "\nwinograd_nhwc_small_plane_gain "
        << p.winograd_nhwc->small_plane_gain << "\nwinograd_nhwc_small_plane_half_kept "
        << p.winograd_nhwc->small_plane_half_kept << "\n";
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  const std::string temporary = path + ".tmp" + std::to_string(std::hash<std::string>{}(out.str()) ^
                                                               reinterpret_cast<uintptr_t>(&p));
  {
    std::ofstream file(temporary, std::ios::trunc);
    file << out.str();
    if (!file) return;  // a read-only cache: the values stay this engine's
  }
  std::filesystem::rename(temporary, path, ec);
  if (ec) std::filesystem::remove(temporary, ec);
}

}  // namespace

std::string machine_probes_path() {
  const std::string dir = tune::machine_tuning_dir();
  return dir.empty() ? "" : dir + "/machine.probes";
}

void take_machine_probes(MachineProbes& probes, const ProbeNeeds& needs, PlanOptions& po) {
  const std::string path = machine_probes_path();
  if (!probes.stored_read) {
    probes.stored_read = true;
    probes.source = !path.empty() && read_stored(path, probes) ? "stored in " + path : "";
  }
  bool measured = false;
  auto measure = [&](bool needed, bool missing, auto&& take) {
    if (needed && missing) take(), measured = true;
  };
  measure(needs.move_flops, probes.move_flops == 0, [&] { probes.move_flops = kernels::measure_move_flops(); });
  measure(needs.amx_flop_cost, probes.amx_flop_cost == 0, [&] { probes.amx_flop_cost = kernels::measure_amx_flop_cost(); });
  measure(needs.bf16_dot_gain, probes.bf16_dot_gain < 0, [&] { probes.bf16_dot_gain = kernels::measure_bf16_dot_gain(); });
  measure(needs.channels_last, probes.transpose_flops == 0, [&] { probes.transpose_flops = kernels::measure_transpose_flops(); });
  // A file from before the gain was stored lacks it: measured again.
  measure(needs.winograd_nhwc, !probes.winograd_nhwc || probes.winograd_nhwc->small_plane_gain <= 0,
          [&] { probes.winograd_nhwc = kernels::measure_winograd_nhwc(); });
  // A file from before the half-kept ratio was stored: only that is measured, the other
  // answers (and so the plans' Winograd layers) stay as they were.
  measure(needs.winograd_nhwc, probes.winograd_nhwc && probes.winograd_nhwc->small_plane_half_kept <= 0,
          [&] { probes.winograd_nhwc->small_plane_half_kept = kernels::measure_winograd_half_kept(); });
  if (measured) {
    if (!path.empty()) write_stored(path, probes);
    // The same words whether this process or an earlier one measured: a plan's report is
    // then the same in every process.
    probes.source = path.empty() ? "measured by this process (no cache folder to store them in)" : "stored in " + path;
  }
  if (needs.move_flops) po.machine.move_flops = probes.move_flops;
  if (needs.amx_flop_cost) po.machine.amx_flop_cost = probes.amx_flop_cost;
  if (needs.bf16_dot_gain) po.machine.bf16_dot_gain = probes.bf16_dot_gain;
  if (needs.channels_last) po.machine.transpose_flops = probes.transpose_flops;
  if (probes.winograd_nhwc && needs.channels_last) {
    po.machine.winograd_nhwc_min_channels = probes.winograd_nhwc->min_channels;
    po.machine.winograd_nhwc_small_planes = probes.winograd_nhwc->small_planes;
    po.machine.winograd_small_plane_gain = probes.winograd_nhwc->small_plane_gain;
    po.machine.winograd_small_plane_half_kept = probes.winograd_nhwc->small_plane_half_kept;
  }
  po.machine.source = probes.source;
}

}  // namespace grove
