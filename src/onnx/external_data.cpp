#include "onnx/external_data.h"

#include <fcntl.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "graph/error.h"

namespace grove {
namespace fs = std::filesystem;
namespace {

int64_t parse_count(const std::string& text, const std::string& what) {
  int64_t v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0)
    throw Error(what + " is '" + text + "', not a non-negative integer");
  return v;
}

// Whether canonical `file` lies strictly below canonical `dir`, compared component by
// component (a string prefix would let /models-evil pass for /models).
bool is_below(const fs::path& dir, const fs::path& file) {
  auto f = file.begin();
  for (const auto& part : dir) {
    if (f == file.end() || *f != part) return false;
    ++f;
  }
  return f != file.end();
}

}  // namespace

ExternalData::ExternalData(const onnx::TensorProto& tp, const fs::path& base_dir) {
  std::string location;
  bool has_length = false;
  for (const auto& kv : tp.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset_ = parse_count(kv.value(), "initializer '" + tp.name() + "': external data offset");
    else if (kv.key() == "length") {
      length_ = parse_count(kv.value(), "initializer '" + tp.name() + "': external data length");
      has_length = true;
    }
  }
  what_ = "initializer '" + tp.name() + "': external data '" + location + "'";
  if (location.empty()) throw Error("initializer '" + tp.name() + "': external data has no location");
  if (location.find('\0') != std::string::npos) throw Error(what_ + " contains a NUL byte");
  const fs::path relative(location);
  if (relative.is_absolute() || relative.has_root_name() || relative.has_root_directory())
    throw Error(what_ + " is an absolute path; it must be relative to the model's directory");
  for (const auto& part : relative)
    if (part == "..") throw Error(what_ + " contains '..'; it must stay inside the model's directory");

  // Resolve symlinks on both sides, then require the file to be inside the directory.
  std::error_code ec;
  const fs::path dir = fs::canonical(base_dir.empty() ? fs::path(".") : base_dir, ec);
  if (ec) throw Error(what_ + ": cannot resolve the model's directory '" + base_dir.string() + "'");
  const fs::path file = fs::canonical(dir / relative, ec);
  if (ec) throw Error(what_ + ": external data file '" + (dir / relative).string() + "' is missing");
  if (!is_below(dir, file))
    throw Error(what_ + " resolves (through a symlink) to '" + file.string() + "', outside the model's directory");

  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is rejected just below.
  fd_ = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd_ < 0) throw Error(what_ + ": cannot open '" + file.string() + "'");
  // What was opened, checked again: a symlink swapped in after the check above (a race with
  // someone writing into the model's directory) shows up here.
  std::error_code link_ec;
  const fs::path opened = fs::read_symlink("/proc/self/fd/" + std::to_string(fd_), link_ec);
  if (!link_ec && !is_below(dir, opened)) {
    ::close(fd_);
    fd_ = -1;
    throw Error(what_ + ": the file opened is '" + opened.string() + "', outside the model's directory");
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw Error(what_ + ": '" + file.string() + "' is not a regular file");
  }
  const int64_t size = st.st_size;
  if (offset_ > size || (has_length && length_ > size - offset_)) {
    ::close(fd_);
    fd_ = -1;
    throw Error(what_ + ": offset " + std::to_string(offset_) + " and length " +
                std::to_string(has_length ? length_ : 0) + " reach past the end of the file (" +
                std::to_string(size) + " bytes); the file is too short");
  }
  if (!has_length) length_ = size - offset_;
}

ExternalData::~ExternalData() {
  if (fd_ >= 0) ::close(fd_);
}

void ExternalData::read(std::byte* dst) const {
  int64_t done = 0;
  while (done < length_) {
    ssize_t n = ::pread(fd_, dst + done, static_cast<size_t>(length_ - done), static_cast<off_t>(offset_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(what_ + ": read failed after " + std::to_string(done) + " bytes (file truncated?)");
    done += n;
  }
}

}  // namespace grove
