// grove run: load a model, bind shapes, run it with the reference executor, print and save outputs.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <set>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/inputs.h"
#include "cli/summary.h"
#include "npy/npy.h"
#include "onnx/import.h"
#include "runtime/model.h"

namespace grove::cli {
namespace {

// A file name for an output: ONNX names may hold '/', ':' and worse. Keeps [A-Za-z0-9._-],
// replaces the rest with '_', never starts with '.', and makes each name unique.
std::string output_file_stem(const std::string& name, std::set<std::string>& used) {
  std::string stem;
  for (char c : name.substr(0, 200)) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-';
    stem += ok ? c : '_';
  }
  if (stem.empty() || stem[0] == '.') stem = "_" + stem;
  std::string unique = stem;
  for (int i = 2; used.count(unique); ++i) unique = stem + "_" + std::to_string(i);
  used.insert(unique);
  return unique;
}

// Done before the run, so a bad --output fails fast instead of after a long inference.
void create_output_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw Error(dir + ": cannot create the output directory" + (ec ? " (" + ec.message() + ")" : ""));
}

void write_outputs(const Graph& g, const TensorMap& outputs, const std::string& dir) {
  std::set<std::string> used;
  for (const auto& decl : g.outputs) {
    std::string path = (std::filesystem::path(dir) / (output_file_stem(decl.name, used) + ".npy")).string();
    write_npy(path, outputs.at(decl.name));
    std::printf("wrote %s\n", path.c_str());
  }
}

// A shape whose byte count overflows or exceeds any real memory is a mistake (often a
// dim_value of a placeholder): say so instead of failing inside an allocation.
void check_input_size(const std::string& model, const std::string& name, const Shape& shape) {
  constexpr double kLimitElements = 1ull << 38;  // 1 TiB of float32
  double elements = 1;
  for (int64_t d : shape) elements *= static_cast<double>(d);
  if (elements > kLimitElements)
    throw Error(model + ": input '" + name + "' of shape " + bracket_shape(shape) + " would hold " +
                strf("%.3g", elements) + " elements, more than memory can hold; give a smaller shape with --shape " +
                name + "=...");
}

}  // namespace

ShapeMap parse_shape_options(const std::vector<std::string>& texts) {
  ShapeMap shapes;
  for (const auto& text : texts) {
    auto [name, shape] = parse_shape_binding(text);
    if (shapes.count(name)) throw Error("--shape: input '" + name + "' is given twice");
    shapes[name] = shape;
  }
  return shapes;
}

int run_run(const RunOptions& o) {
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  ShapeMap shapes = parse_shape_options(o.shapes);
  Graph imported = load_onnx(o.model);
  TensorMap inputs = load_input_files(imported, o.inputs, shapes);
  ShapeMap resolved = resolve_input_shapes(imported, shapes);

  for (const auto& [name, shape] : resolved) check_input_size(o.model, name, shape);

  std::mt19937_64 rng(o.seed);
  std::vector<std::string> randomised;
  for (const auto& decl : imported.inputs) {
    if (inputs.count(decl.name)) continue;
    try {
      inputs[decl.name] = random_tensor(decl.dtype, resolved.at(decl.name), rng);
    } catch (const Error& e) {
      throw e.prefixed(o.model + ": input '" + decl.name + "': cannot make random data: ");
    }
    randomised.push_back(decl.name);
  }

  Model model(std::move(imported), resolved);
  if (!o.output_dir.empty()) create_output_dir(o.output_dir);
  double load_s = std::chrono::duration<double>(clock::now() - t0).count();
  auto t1 = clock::now();
  TensorMap outputs = model.run_reference(inputs);
  double run_s = std::chrono::duration<double>(clock::now() - t1).count();

  // Inputs and outputs are declared the same in the imported and the bound graph; the
  // imported one also serves models whose shapes depend on input values and stay unbound.
  const Graph& g = model.imported();
  std::printf("model: %s\n", o.model.c_str());
  if (!model.is_bound())
    std::printf("note: shapes depend on input values, so the graph ran unbound (%s)\n",
                model.unbound_reason().c_str());
  std::printf("inputs:\n");
  for (const auto& decl : g.inputs) {
    const Tensor& t = inputs.at(decl.name);
    bool random = std::find(randomised.begin(), randomised.end(), decl.name) != randomised.end();
    std::printf("  %s: %s %s  %s\n", decl.name.c_str(), std::string(dtype_name(t.dtype())).c_str(),
                bracket_shape(t.shape()).c_str(),
                random ? strf("random (seed %llu)", static_cast<unsigned long long>(o.seed)).c_str() : "from file");
  }
  std::printf("outputs:\n");
  for (const auto& decl : g.outputs) std::fputs(summarize_output(decl.name, outputs.at(decl.name)).c_str(), stdout);
  if (!o.output_dir.empty()) write_outputs(g, outputs, o.output_dir);
  std::printf("latency: %s (reference executor, single-threaded; --threads %d recorded, not used yet)\n",
              milliseconds(run_s).c_str(), o.threads);
  std::printf("load, inputs and shape binding: %s\n", milliseconds(load_s).c_str());
  return 0;
}

}  // namespace grove::cli
