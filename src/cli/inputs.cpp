#include "cli/inputs.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <type_traits>

#include "cli/format.h"
#include "npy/npy.h"

namespace grove::cli {
namespace {

std::string input_names(const Graph& g) {
  std::string names;
  for (const auto& in : g.inputs) names += (names.empty() ? "" : ", ") + in.name;
  return names.empty() ? "none" : names;
}

void check_against_declaration(const Graph& g, const ValueDecl& decl, const Tensor& t, const std::string& file) {
  std::string which = "input '" + decl.name + "' of " + g.path;
  if (t.dtype() != decl.dtype)
    throw Error(file + ": holds " + std::string(dtype_name(t.dtype())) + ", but " + which + " is " +
                std::string(dtype_name(decl.dtype)) + " (convert it with arr.astype(...))");
  if (!decl.has_shape) return;
  bool fits = t.shape().size() == decl.dims.size();
  for (size_t i = 0; fits && i < decl.dims.size(); ++i)
    fits = decl.dims[i].value < 0 || decl.dims[i].value == t.shape()[i];
  if (!fits) {
    bool rank_differs = t.shape().size() != decl.dims.size();
    throw Error(file + ": holds shape " + bracket_shape(t.shape()) +
                (rank_differs ? " (rank " + std::to_string(t.shape().size()) + ")" : "") + ", but " + which +
                " has " + (rank_differs ? "rank " + std::to_string(decl.dims.size()) + ": " : "shape ") +
                declared_dims(decl));
  }
}

}  // namespace

TensorMap load_input_files(const Graph& g, const std::vector<std::string>& texts, ShapeMap& shapes) {
  TensorMap inputs;
  for (const auto& text : texts) {
    auto eq = text.find('=');
    std::string name = eq == std::string::npos ? "" : text.substr(0, eq);
    std::string file = eq == std::string::npos ? text : text.substr(eq + 1);
    if (file.empty()) throw Error("bad --input '" + text + "': expected NAME=FILE.npy");
    if (name.empty()) {
      if (g.inputs.size() != 1)
        throw Error("--input " + text + ": " + g.path + " has " + std::to_string(g.inputs.size()) +
                    " inputs (" + input_names(g) + "); name it as NAME=FILE.npy");
      name = g.inputs[0].name;
    }
    // An initializer that is also a graph input may be fed too (it overrides the stored value).
    const ValueDecl* fed_default = g.find_default(name);
    const ValueDecl* decl = fed_default ? fed_default : g.find_input(name);
    if (!decl)
      throw Error("--input " + text + ": " + g.path + " has no input named '" + name + "' (inputs: " +
                  input_names(g) + ")");
    if (inputs.count(name)) throw Error("--input: input '" + name + "' is given twice");
    Tensor t = read_npy(file);
    check_against_declaration(g, *decl, t, file);
    auto given = shapes.find(name);
    if (given != shapes.end() && given->second != t.shape())
      throw Error(file + ": holds shape " + bracket_shape(t.shape()) + ", but --shape " + name + "=" +
                  shape_str(given->second) + " was given");
    if (!fed_default) shapes[name] = t.shape();  // a default is bound when fed, not here
    inputs[name] = std::move(t);
  }
  return inputs;
}

Tensor random_tensor(DType dtype, const Shape& shape, std::mt19937_64& rng) {
  if (dtype == DType::f16) {  // the float32 values rounded to half precision
    Tensor wide = random_tensor(DType::f32, shape, rng), half(DType::f16, shape);
    uint16_t* h = reinterpret_cast<uint16_t*>(half.raw());
    for (int64_t i = 0; i < wide.numel(); ++i) h[i] = f64_to_f16(wide.data<float>()[i]);
    return half;
  }
  Tensor t(dtype, shape);
  auto fill = [&](auto zero) {
    using T = decltype(zero);
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.numel(); ++i) {
      uint64_t bits = rng();
      if constexpr (std::is_same_v<T, bool>) {
        p[i] = (bits >> 63) != 0;
      } else if constexpr (std::is_floating_point_v<T>) {
        // 53 (or 24) high bits -> [0, 1) exactly, then to [-1, 1).
        double unit = static_cast<double>(bits >> 11) * 0x1.0p-53;
        p[i] = static_cast<T>(2.0 * unit - 1.0);
        if (p[i] >= T(1)) p[i] = std::nextafter(T(1), T(0));  // float rounding can reach 1
      } else {
        p[i] = static_cast<T>(bits % 100);
      }
    }
  };
  if (t.numel() > 0) visit_dtype(dtype, fill);
  return t;
}

std::vector<TensorMap> load_sample_dir(const Graph& g, const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) throw Error("--calibrate " + dir + ": not a directory");
  std::vector<std::filesystem::path> entries;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) entries.push_back(e.path());
  std::sort(entries.begin(), entries.end());
  std::vector<TensorMap> samples;
  for (const auto& path : entries) {
    std::vector<std::string> texts;
    if (std::filesystem::is_directory(path)) {
      for (const auto& in : g.inputs) texts.push_back(in.name + "=" + (path / (in.name + ".npy")).string());
    } else if (path.extension() == ".npy") {
      if (g.inputs.size() != 1)
        throw Error("--calibrate " + dir + ": " + g.path + " has " + std::to_string(g.inputs.size()) +
                    " inputs; put each sample in its own subdirectory holding one NAME.npy per input");
      texts.push_back(path.string());
    } else {
      continue;
    }
    ShapeMap shapes;
    samples.push_back(load_input_files(g, texts, shapes));
  }
  if (samples.empty())
    throw Error("--calibrate " + dir + ": no samples (expected .npy files, or one subdirectory per sample)");
  return samples;
}

}  // namespace grove::cli
