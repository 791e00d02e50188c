#pragma once
// Helpers for the CLI tests: run the built `grove` binary and capture what it says, and build
// small (and broken) ONNX models with the protobuf classes, so no Python is needed.
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <string>
#include <vector>

namespace grove::cli_test {

struct Result {
  int exit_code = -1;     // the process exit status; 128+N when killed by signal N; 124 on timeout
  std::string out, err;
};

// Runs `grove args...` with a time limit, in `cwd` when given, with its address space limited
// to `address_space_kib` KiB when non-zero (ulimit -v: allocations past it fail).
Result run_grove(const std::vector<std::string>& args, const std::filesystem::path& cwd = {},
                 int64_t address_space_kib = 0);

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Builds a ModelProto piece by piece. Dims are numbers ("3") or symbolic names ("batch").
class ModelBuilder {
 public:
  explicit ModelBuilder(int opset = 13);
  ModelBuilder& input(const std::string& name, int elem_type, const std::vector<std::string>& dims);
  ModelBuilder& output(const std::string& name, int elem_type, const std::vector<std::string>& dims);
  ModelBuilder& initializer(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values);
  ModelBuilder& node(const std::string& op, const std::vector<std::string>& inputs,
                     const std::vector<std::string>& outputs, const std::string& name = "");
  onnx::ModelProto& proto() { return model_; }
  std::string bytes() const;
  std::filesystem::path save(const std::filesystem::path& path) const;

 private:
  onnx::ModelProto model_;
};

std::string read_bytes(const std::filesystem::path& path);
void write_bytes(const std::filesystem::path& path, const std::string& bytes);

// The checks every failing run must pass: exit code 1, one "grove: error:" message on
// stderr, and no sign of a crash or sanitizer report.
void expect_clean_error(const Result& r);

}  // namespace grove::cli_test
