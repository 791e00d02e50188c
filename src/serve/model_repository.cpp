#include "serve/model_repository.h"

#include <filesystem>

#include "dynamic/subnet_spec.h"
#include "graph/graph.h"
#include "serve/http_types.h"

namespace grove::serve {

namespace fs = std::filesystem;

ModelRepository::ModelRepository(Engine& engine, Limits limits, std::string directory, BatchingOptions batching,
                                 SessionOptions session)
    : engine_(engine), limits_(limits), directory_(std::move(directory)), batching_(batching), session_options_(session) {}

bool ModelRepository::valid_name(const std::string& name) {
  if (name.empty() || name.size() > 128 || name[0] == '.') return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

std::string ModelRepository::path_in_directory(const std::string& name) const {
  if (directory_.empty()) return "";
  for (const fs::path& p : {fs::path(directory_) / (name + ".onnx"), fs::path(directory_) / name / "model.onnx",
                            fs::path(directory_) / name / "1" / "model.onnx"}) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

std::vector<std::string> ModelRepository::directory_models() const {
  std::vector<std::string> names;
  if (directory_.empty()) return names;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(directory_, ec)) {
    std::string name = e.path().extension() == ".onnx" ? e.path().stem().string() : e.path().filename().string();
    if (valid_name(name) && !path_in_directory(name).empty()) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

void ModelRepository::load(const std::string& name, const std::string& path) {
  if (!valid_name(name)) throw HttpError(400, "bad model name '" + name + "' (letters, digits, _ . - only)");
  std::string file = path.empty() ? path_in_directory(name) : path;
  if (file.empty()) throw HttpError(404, "no model named '" + name + "' in the model repository");
  auto model = std::make_shared<ServedModel>();
  model->name = name;
  model->path = file;
  try {
    model->session = std::make_unique<Session>(engine_, Model::load(file, {}, limits_), session_options_);
    if (imported_graph(model->session->model()).metadata.count(kSubnetsMetadataKey))
      model->dynamic = std::make_unique<DynamicSession>(engine_, file, session_options_);
  } catch (const Error& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!models_.count(name)) unavailable_[name] = e.what();
    throw HttpError(400, e.what());
  }
  model->inputs = model->session->inputs();
  model->outputs = model->session->outputs();
  if (batching_.max_batch > 0) {
    model->batching_note = DynamicBatcher::why_not_batchable(model->inputs, model->outputs);
    if (model->batching_note.empty())
      model->batcher = std::make_unique<DynamicBatcher>(*model->session, batching_.max_batch, batching_.max_delay);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  models_[name] = std::move(model);
  unavailable_.erase(name);
}

void ModelRepository::unload(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = models_.find(name);
  if (it == models_.end()) throw HttpError(404, "model '" + name + "' is not loaded");
  models_.erase(it);
  unavailable_[name] = "unloaded";
}

std::shared_ptr<ServedModel> ModelRepository::find(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = models_.find(name);
  return it == models_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<ServedModel>> ModelRepository::loaded() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::shared_ptr<ServedModel>> out;
  for (const auto& [name, m] : models_) out.push_back(m);
  return out;
}

size_t ModelRepository::loaded_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return models_.size();
}

std::vector<RepositoryEntry> ModelRepository::index() const {
  std::map<std::string, RepositoryEntry> all;
  for (const std::string& name : directory_models()) all[name] = {name, "UNAVAILABLE", "not loaded"};
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [name, reason] : unavailable_) all[name] = {name, "UNAVAILABLE", reason};
  for (const auto& [name, m] : models_) all[name] = {name, "READY", ""};
  std::vector<RepositoryEntry> out;
  for (auto& [name, e] : all) out.push_back(std::move(e));
  return out;
}

}  // namespace grove::serve
