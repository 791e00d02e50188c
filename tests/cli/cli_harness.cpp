#include "cli_harness.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace grove::cli_test {
namespace {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

void set_shape(onnx::ValueInfoProto* vi, int elem_type, const std::vector<std::string>& dims) {
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  auto* shape = tt->mutable_shape();
  for (const auto& d : dims) {
    auto* dim = shape->add_dim();
    if (!d.empty() && d.find_first_not_of("0123456789") == std::string::npos) dim->set_dim_value(std::stoll(d));
    else dim->set_dim_param(d);
  }
}

}  // namespace

Result run_grove(const std::vector<std::string>& args, const std::filesystem::path& cwd, int64_t address_space_kib) {
  static int counter = 0;
  auto base = std::filesystem::temp_directory_path() /
              ("grove_cli_capture_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
  std::string cmd;
  if (!cwd.empty()) cmd += "cd " + shell_quote(cwd.string()) + " && ";
  if (address_space_kib > 0) cmd += "ulimit -v " + std::to_string(address_space_kib) + " && ";
  // timeout: a hang is a failure (exit 124), not a stuck test run.
  cmd += "timeout -k 5 120 " + shell_quote(GROVE_BINARY);
  for (const auto& a : args) cmd += " " + shell_quote(a);
  cmd += " >" + shell_quote(base.string() + ".out") + " 2>" + shell_quote(base.string() + ".err");
  int status = std::system(cmd.c_str());
  Result r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_bytes(base.string() + ".out");
  r.err = read_bytes(base.string() + ".err");
  std::filesystem::remove(base.string() + ".out");
  std::filesystem::remove(base.string() + ".err");
  return r;
}

TempDir::TempDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = info ? std::string(info->test_suite_name()) + "_" + info->name() : "grove";
  path_ = std::filesystem::temp_directory_path() / ("grove_cli_test_" + std::to_string(getpid()) + "_" + name);
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

ModelBuilder::ModelBuilder(int opset) {
  model_.set_ir_version(7);
  model_.set_producer_name("grove cli tests");
  auto* op = model_.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  model_.mutable_graph()->set_name("test");
}

ModelBuilder& ModelBuilder::input(const std::string& name, int elem_type, const std::vector<std::string>& dims) {
  auto* vi = model_.mutable_graph()->add_input();
  vi->set_name(name);
  set_shape(vi, elem_type, dims);
  return *this;
}

ModelBuilder& ModelBuilder::output(const std::string& name, int elem_type, const std::vector<std::string>& dims) {
  auto* vi = model_.mutable_graph()->add_output();
  vi->set_name(name);
  set_shape(vi, elem_type, dims);
  return *this;
}

ModelBuilder& ModelBuilder::initializer(const std::string& name, const std::vector<int64_t>& dims,
                                        const std::vector<float>& values) {
  auto* t = model_.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float v : values) t->add_float_data(v);
  return *this;
}

ModelBuilder& ModelBuilder::node(const std::string& op, const std::vector<std::string>& inputs,
                                 const std::vector<std::string>& outputs, const std::string& name) {
  auto* n = model_.mutable_graph()->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const auto& i : inputs) n->add_input(i);
  for (const auto& o : outputs) n->add_output(o);
  return *this;
}

std::string ModelBuilder::bytes() const { return model_.SerializeAsString(); }

std::filesystem::path ModelBuilder::save(const std::filesystem::path& path) const {
  write_bytes(path, bytes());
  return path;
}

std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

void expect_clean_error(const Result& r) {
  // GROVE_CLI_TEST_SHOW=1 prints every error message, to review how they read.
  if (std::getenv("GROVE_CLI_TEST_SHOW")) std::printf("    stderr: %s", r.err.c_str());
  EXPECT_EQ(r.exit_code, 1) << "stderr: " << r.err;
  EXPECT_EQ(r.err.rfind("grove: error: ", 0), 0u) << "stderr: " << r.err;
  // One message, not a cascade (a message may span lines, but only one "error:" line).
  size_t first = r.err.find("grove: error:");
  EXPECT_EQ(r.err.find("grove: error:", first + 1), std::string::npos) << "stderr: " << r.err;
  EXPECT_EQ(r.err.find("Sanitizer"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("runtime error:"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
}

}  // namespace grove::cli_test
