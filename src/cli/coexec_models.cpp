#include "cli/coexec_models.h"

#include <future>
#include <random>

#include "cli/inputs.h"
#include "onnx/import.h"

namespace grove::cli {

Loaded load_for_coexec(Engine& engine, const BenchOptions& o, const std::string& path, const ShapeMap& all_shapes) {
  Loaded m;
  m.path = path;
  Graph g = load_onnx(path, o.limits);
  ShapeMap shapes;
  for (const auto& [name, shape] : all_shapes)
    if (g.find_input(name)) shapes[name] = shape;
  std::vector<std::string> files;
  for (const auto& text : o.inputs) {
    auto eq = text.find('=');
    if (eq == std::string::npos) throw Error("--input " + text + ": with several models, name it as NAME=FILE.npy");
    if (g.find_input(text.substr(0, eq))) files.push_back(text);
  }
  m.inputs = load_input_files(g, files, shapes);
  ShapeMap resolved = resolve_input_shapes(g, shapes);
  std::mt19937_64 rng(o.seed);
  for (const auto& decl : g.inputs)
    if (!m.inputs.count(decl.name)) m.inputs[decl.name] = random_tensor(decl.dtype, resolved.at(decl.name), rng);
  m.session = std::make_unique<Session>(
      engine, model_from_graph(g, resolved, o.limits),
      SessionOptions{.schedule = o.schedule == "barrier" ? Schedule::barrier : Schedule::aspen,
                     .tiles_per_op = o.tiles_per_op,
                     .precision = parse_precision(o.precision)});
  if (!plan_for(*m.session, resolved))
    throw Error(path + ": shapes depend on input values; co-execution needs plannable models");
  return m;
}

double run_together(std::vector<Loaded>& models) {
  auto t = Clock::now();
  std::vector<std::future<TensorMap>> pending;
  for (auto& m : models) pending.push_back(m.session->submit(m.inputs));
  for (auto& p : pending) p.get();
  return ms_since(t);
}

double run_in_turn(std::vector<Loaded>& models) {
  auto t = Clock::now();
  for (auto& m : models) m.session->run(m.inputs);
  return ms_since(t);
}

}  // namespace grove::cli
