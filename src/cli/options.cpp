#include "cli/options.h"

namespace grove::cli {

const char* const kShapeHelp =
    "Binds an input's shape: NAME=DIMS with dims separated by 'x', e.g. --shape input=1x3x224x224. "
    "Needed for inputs with symbolic (dynamic) dims; checked against fixed dims. Repeat for each input.";

const char* const kPruneHelp =
    "Dynamic feature-map pruning (Antidote, docs/dynamic.md): by default a model's grove.antidote metadata "
    "applies; 'off' runs it unpruned; or statements such as 'prune relu1.out channels=0.5 positions=0.75' (block=4: positions kept in 4x4 blocks), "
    "several separated by ';'";

const char* const kPrecisionHelp =
    "Arithmetic of Conv/MatMul/Gemm with constant weights: fp32, or bf16 (bfloat16 operands, float32 "
    "accumulation, on AMX tiles where the CPU has them, else AVX512-BF16; runs fp32 with a note on CPUs without either), "
    "or where offered int8w (the weights of MatMul and Gemm as int8 with a scale per output column, activations and sums "
    "fp32: a quarter of the bytes a decode step reads). Everything else stays fp32. "
    "docs/precision.md";

const char* const kLayoutHelp =
    "Activation layout of float convs: nhwc runs each chain of convs the channels-last rule takes on NHWC "
    "activations (Transposes where NCHW ops meet them; Winograd layers, still on Winograd from 64 input channels, "
    "and stems of few input channels go channels-last only beside convs that pay for their Transposes; grouped "
    "convs of more than 16 groups stay NCHW, fewer run as one conv per group), nchw runs every conv as the model is "
    "written. docs/layout.md";

const char* const kTuningHelp =
    "Per-Conv primitives and tile grids from grove tune: auto uses the tuning record made for this model, CPU, "
    "thread count and precision when there is one, else this CPU's performance model (grove tune --fit) when "
    "there is one; record or model uses only that; off plans by the hand rules; or the path of a record file. "
    "docs/tuning.md";

const char* const kSubnetHelp =
    "Dynamic model (metadata grove.subnets): the sub-net to run, by name or width ratio. Any other model: "
    "slice it uniformly at this width ratio (a latency study: the narrower net is untrained). docs/dynamic.md.";

void add_limit_options(CLI::App* cmd, grove::Limits& limits) {
  cmd->add_option("--max-memory", limits.max_memory,
                  "Most bytes of weights plus declared activations a model may make grove allocate; a larger "
                  "model is an error before anything is allocated (0: half the machine's physical memory)")
      ->type_name("BYTES")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-nodes", limits.max_nodes, "Most nodes a model may have, those in subgraphs included")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-initializers", limits.max_initializers,
                  "Most initializers (and Constant tensors) a model may have, those in subgraphs included")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-tiles", limits.max_tiles,
                  "Most tiles a plan may cut the model into (and 16 dependency edges per tile)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-loop-iterations", limits.max_loop_iterations,
                  "Most iterations one Loop node may run in one inference (an endless loop becomes an error)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
}

CLI::Option* add_shape_option(CLI::App* cmd, std::vector<std::string>& shapes) {
  return cmd->add_option("--shape", shapes, kShapeHelp)->type_name("NAME=DIMS")->allow_extra_args(false);
}

CLI::Option* add_input_option(CLI::App* cmd, std::vector<std::string>& inputs, const std::string& help) {
  return cmd->add_option("--input,-i", inputs, help)->type_name("NAME=FILE")->allow_extra_args(false);
}

CLI::Option* add_threads_option(CLI::App* cmd, int& threads, const std::string& help) {
  return cmd->add_option("--threads,-t", threads, help)->capture_default_str()->check(CLI::Range(0, 4096));
}

CLI::Option* add_precision_option(CLI::App* cmd, std::string& precision, const std::vector<std::string>& allowed) {
  return cmd->add_option("--precision", precision, kPrecisionHelp)->capture_default_str()->check(CLI::IsMember(allowed));
}

CLI::Option* add_tuning_option(CLI::App* cmd, std::string& tuning) {
  return cmd->add_option("--tuning", tuning, kTuningHelp)->capture_default_str()->type_name("auto|off|FILE");
}

CLI::Option* add_layout_option(CLI::App* cmd, std::string& layout) {
  return cmd->add_option("--layout", layout, kLayoutHelp)->capture_default_str()->check(CLI::IsMember({"nchw", "nhwc"}));
}

CLI::Option* add_schedule_option(CLI::App* cmd, std::string& schedule, const std::string& help) {
  return cmd->add_option("--schedule", schedule, help)->capture_default_str()->check(CLI::IsMember({"aspen", "barrier"}));
}

CLI::Option* add_seed_option(CLI::App* cmd, uint64_t& seed, const std::string& help) {
  return cmd->add_option("--seed", seed, help)->capture_default_str();
}

}  // namespace grove::cli
