#pragma once
// The options several `grove` subcommands share, each defined once: the same flag, help
// text, default shown and check wherever it appears. Each subcommand declares its options in
// its own cmd_*.cpp (add_*_command) from these and its own.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "graph/limits.h"

namespace grove::cli {

// Help texts that several options quote and extend.
extern const char* const kShapeHelp;
extern const char* const kPruneHelp;
extern const char* const kPrecisionHelp;
extern const char* const kLayoutHelp;
extern const char* const kTuningHelp;
extern const char* const kSubnetHelp;

// --max-memory, --max-nodes, --max-tiles and --max-loop-iterations (docs/security.md).
void add_limit_options(CLI::App* cmd, Limits& limits);
// --shape NAME=DIMS, repeatable.
CLI::Option* add_shape_option(CLI::App* cmd, std::vector<std::string>& shapes);
// --input,-i NAME=FILE, repeatable.
CLI::Option* add_input_option(CLI::App* cmd, std::vector<std::string>& inputs, const std::string& help);
// --threads,-t: 0 means the cores this process may use.
CLI::Option* add_threads_option(CLI::App* cmd, int& threads,
                                const std::string& help = "Worker threads (0: the cores this process may use)");
// --precision, one of `allowed`.
CLI::Option* add_precision_option(CLI::App* cmd, std::string& precision, const std::vector<std::string>& allowed);
// --tuning auto|off|FILE.
CLI::Option* add_tuning_option(CLI::App* cmd, std::string& tuning);
// --layout nchw|nhwc.
CLI::Option* add_layout_option(CLI::App* cmd, std::string& layout);
// --schedule aspen|barrier.
CLI::Option* add_schedule_option(CLI::App* cmd, std::string& schedule, const std::string& help);
// --seed of the random inputs.
CLI::Option* add_seed_option(CLI::App* cmd, uint64_t& seed, const std::string& help = "Seed for the random inputs");

}  // namespace grove::cli
