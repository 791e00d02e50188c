#pragma once
// External data of an ONNX initializer (TensorProto.data_location = EXTERNAL): the bytes live
// in a file beside the model, named by the `location`, `offset` and `length` entries.
//
// The model is untrusted input, so the file is confined to the model's directory: the
// location must be relative, may not contain a `..` component, and after resolving symlinks
// must still lie inside that directory; it must be a regular file (no device, FIFO or
// directory), and offset + length must lie within it. See docs/security.md.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

namespace onnx {
class TensorProto;
}

namespace grove {

class ExternalData {
 public:
  // Resolves and opens the initializer's file and checks its range; `base_dir` is the model
  // file's directory ("" for the current directory). Throws Error naming the initializer and
  // the location for every rule above.
  ExternalData(const onnx::TensorProto& tp, const std::filesystem::path& base_dir);
  ~ExternalData();
  ExternalData(const ExternalData&) = delete;
  ExternalData& operator=(const ExternalData&) = delete;

  // Bytes the entry covers: `length`, or the rest of the file after `offset`.
  size_t length() const { return static_cast<size_t>(length_); }
  // Copies length() bytes into dst.
  void read(std::byte* dst) const;

 private:
  std::string what_;  // "initializer 'w': external data 'weights.bin'" for messages
  int fd_ = -1;
  int64_t offset_ = 0, length_ = 0;
};

}  // namespace grove
