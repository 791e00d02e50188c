#include "npy/npy.h"

#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

namespace grove {
namespace {

static_assert(std::endian::native == std::endian::little, "npy.cpp assumes a little-endian host");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

struct DescrEntry {
  const char* code;  // the type part of descr, without its byte-order character
  DType dtype;
};
constexpr DescrEntry kDescrs[] = {
    {"f4", DType::f32}, {"f8", DType::f64}, {"i8", DType::i64}, {"i4", DType::i32}, {"i2", DType::i16},
    {"i1", DType::i8},  {"u1", DType::u8},  {"u2", DType::u16}, {"u4", DType::u32}, {"u8", DType::u64},
    {"b1", DType::boolean}, {"f2", DType::f16},
};
constexpr const char* kSupportedList = "float32 <f4, float64 <f8, int64 <i8, int32 <i4, int16 <i2, int8 |i1, "
                                       "uint8 |u1, uint16 <u2, uint32 <u4, uint64 <u8, bool |b1, float16 <f2";

std::optional<std::string> descr_of(DType dtype) {
  for (const auto& e : kDescrs)
    if (e.dtype == dtype) return std::string(dtype_size(dtype) == 1 ? "|" : "<") + e.code;
  return std::nullopt;
}

// The header is a Python dict literal, e.g. {'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }.
// This parser accepts exactly the literals NumPy writes: strings, True/False and tuples of ints.
struct HeaderValue {
  enum class Kind { string, boolean, tuple } kind = Kind::string;
  std::string text;
  bool flag = false;
  Shape ints;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& path) : s_(text), path_(path) {}

  std::map<std::string, HeaderValue> parse_dict() {
    std::map<std::string, HeaderValue> dict;
    skip_space();
    expect('{');
    for (;;) {
      skip_space();
      if (peek() == '}') { ++pos_; break; }
      std::string key = parse_string();
      skip_space();
      expect(':');
      skip_space();
      if (dict.count(key)) fail("key '" + key + "' appears twice");
      dict[key] = parse_value(key);
      skip_space();
      if (peek() == ',') { ++pos_; continue; }
      if (peek() == '}') { ++pos_; break; }
      fail("expected ',' or '}' after the value of '" + key + "'");
    }
    skip_space();
    if (pos_ != s_.size()) fail("unexpected text after the closing '}'");
    return dict;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(path_ + ": malformed .npy header: " + what + " (at character " + std::to_string(pos_) + ")");
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  std::string parse_string() {
    char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string");
    size_t end = s_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string out(s_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return out;
  }
  int64_t parse_int() {
    size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      int digit = s_[pos_] - '0';
      if (v > (std::numeric_limits<int64_t>::max() - digit) / 10) fail("dimension too large");
      v = v * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) fail(peek() == '-' ? "negative dimension" : "expected a non-negative integer");
    if (peek() == 'L') ++pos_;  // Python 2 long literal
    return v;
  }
  HeaderValue parse_value(const std::string& key) {
    HeaderValue v;
    char c = peek();
    if (c == '\'' || c == '"') {
      v.kind = HeaderValue::Kind::string;
      v.text = parse_string();
    } else if (s_.substr(pos_, 4) == "True") {
      v.kind = HeaderValue::Kind::boolean;
      v.flag = true;
      pos_ += 4;
    } else if (s_.substr(pos_, 5) == "False") {
      v.kind = HeaderValue::Kind::boolean;
      pos_ += 5;
    } else if (c == '(') {
      v.kind = HeaderValue::Kind::tuple;
      ++pos_;
      for (;;) {
        skip_space();
        if (peek() == ')') { ++pos_; break; }
        v.ints.push_back(parse_int());
        skip_space();
        if (peek() == ',') { ++pos_; continue; }
        if (peek() == ')') { ++pos_; break; }
        fail("expected ',' or ')' in the shape tuple");
      }
    } else if (c == '[' && key == "descr") {
      throw Error(path_ + ": structured (record) dtypes are not supported; save a plain numeric array");
    } else {
      fail("unexpected value for '" + key + "'");
    }
    return v;
  }

  std::string_view s_;
  const std::string& path_;
  size_t pos_ = 0;
};

DType dtype_from_descr(const std::string& descr, const std::string& path) {
  if (descr.size() >= 2) {
    char order = descr[0];
    std::string code = descr.substr(1);
    for (const auto& e : kDescrs) {
      if (code != e.code) continue;
      bool multibyte = dtype_size(e.dtype) > 1;
      if (order == '>' && multibyte)
        throw Error(path + ": big-endian data ('" + descr + "') is not supported; convert it with arr.astype('<" + code +
                    "')");
      if (order == '<' || order == '|' || order == '=' || order == '>') return e.dtype;
    }
  }
  throw Error(path + ": dtype '" + descr + "' is not supported; grove reads " + kSupportedList);
}

// Bytes needed for `shape` of `dtype`, or nullopt when that overflows.
std::optional<uint64_t> data_bytes(const Shape& shape, DType dtype) {
  uint64_t n = dtype_size(dtype);
  for (int64_t d : shape) {
    uint64_t ud = static_cast<uint64_t>(d);
    if (ud != 0 && n > std::numeric_limits<uint64_t>::max() / 4 / ud) return std::nullopt;
    n *= ud;
  }
  return n;
}

uint32_t read_le(std::span<const std::byte> b, size_t offset, size_t width) {
  uint32_t v = 0;
  for (size_t i = 0; i < width; ++i) v |= static_cast<uint32_t>(b[offset + i]) << (8 * i);
  return v;
}

}  // namespace

Tensor parse_npy(std::span<const std::byte> bytes, const std::string& path) {
  if (bytes.size() < kMagicSize + 2 || std::memcmp(bytes.data(), kMagic, kMagicSize) != 0)
    throw Error(path + ": not a .npy file (it does not start with the \\x93NUMPY magic)");
  int major = static_cast<int>(bytes[6]), minor = static_cast<int>(bytes[7]);
  if (major < 1 || major > 3)
    throw Error(path + ": unsupported .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                " (grove reads 1.0, 2.0 and 3.0)");
  size_t len_width = major == 1 ? 2 : 4;
  size_t header_start = kMagicSize + 2 + len_width;
  if (bytes.size() < header_start) throw Error(path + ": truncated .npy file (the header length is cut off)");
  size_t header_len = read_le(bytes, kMagicSize + 2, len_width);
  if (header_len > bytes.size() - header_start)
    throw Error(path + ": truncated .npy file (the header says " + std::to_string(header_len) + " bytes, only " +
                std::to_string(bytes.size() - header_start) + " follow)");

  std::string_view header(reinterpret_cast<const char*>(bytes.data() + header_start), header_len);
  auto dict = HeaderParser(header, path).parse_dict();
  for (const auto& [key, value] : dict)
    if (key != "descr" && key != "fortran_order" && key != "shape")
      throw Error(path + ": malformed .npy header: unexpected key '" + key + "'");
  auto need = [&](const char* key, HeaderValue::Kind kind, const char* kind_name) -> const HeaderValue& {
    auto it = dict.find(key);
    if (it == dict.end()) throw Error(path + ": malformed .npy header: no '" + key + "' key");
    if (it->second.kind != kind) throw Error(path + ": malformed .npy header: '" + key + "' should be " + kind_name);
    return it->second;
  };
  DType dtype = dtype_from_descr(need("descr", HeaderValue::Kind::string, "a string").text, path);
  const HeaderValue& fortran = need("fortran_order", HeaderValue::Kind::boolean, "True or False");
  const Shape& shape = need("shape", HeaderValue::Kind::tuple, "a tuple").ints;
  bool trivially_ordered = shape.size() <= 1;  // for rank <= 1 Fortran and C order are the same bytes
  if (fortran.flag && !trivially_ordered)
    throw Error(path + ": Fortran-order arrays are not supported; save np.ascontiguousarray(arr) instead");

  auto want = data_bytes(shape, dtype);
  if (!want) throw Error(path + ": shape in the .npy header is too large");
  size_t have = bytes.size() - header_start - header_len;
  std::string what = "shape " + shape_str(shape) + " of " + std::string(dtype_name(dtype)) + " needs " +
                     std::to_string(*want) + " data bytes, the file has " + std::to_string(have);
  if (have < *want) throw Error(path + ": truncated .npy file: " + what);
  if (have > *want) throw Error(path + ": .npy file has extra bytes after the data: " + what);

  Tensor t(dtype, shape);
  const std::byte* src = bytes.data() + header_start + header_len;
  if (dtype == DType::boolean) {
    // Any non-zero byte is true; copying raw bytes into bool storage would be undefined.
    bool* dst = t.data<bool>();
    for (int64_t i = 0; i < t.numel(); ++i) dst[i] = src[i] != std::byte{0};
  } else if (t.bytes() > 0) {
    std::memcpy(t.raw(), src, t.bytes());
  }
  return t;
}

Tensor read_npy(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(path + ": is a directory, not a .npy file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw Error(path + ": cannot open .npy file" + (std::filesystem::exists(path, ec) ? "" : " (no such file)"));
  std::ostringstream ss;
  ss << f.rdbuf();
  std::string bytes = ss.str();
  return parse_npy(std::as_bytes(std::span(bytes.data(), bytes.size())), path);
}

std::string encode_npy(const Tensor& t) {
  auto descr = descr_of(t.dtype());
  if (!descr) throw Error("cannot write dtype " + std::string(dtype_name(t.dtype())) + " to .npy");
  std::string shape = "(";
  for (size_t i = 0; i < t.shape().size(); ++i) shape += (i ? ", " : "") + std::to_string(t.shape()[i]);
  if (t.shape().size() == 1) shape += ",";
  shape += ")";
  std::string header = "{'descr': '" + *descr + "', 'fortran_order': False, 'shape': " + shape + ", }";

  // Pad with spaces and end with '\n' so the data starts on a 64-byte boundary.
  // Version 1.0 stores the header length in 2 bytes; longer headers need version 2.0.
  auto padded_total = [&](size_t len_width) { return (kMagicSize + 2 + len_width + header.size() + 1 + 63) / 64 * 64; };
  size_t len_width = padded_total(2) - (kMagicSize + 4) > 65535 ? 4 : 2;
  size_t prefix = kMagicSize + 2 + len_width;
  size_t total = padded_total(len_width);
  header.append(total - prefix - header.size() - 1, ' ');
  header += '\n';

  std::string out(kMagic, kMagicSize);
  out += static_cast<char>(len_width == 2 ? 1 : 2);
  out += '\0';
  for (size_t i = 0; i < len_width; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  out += header;
  size_t data_at = out.size();
  out.resize(data_at + t.bytes());
  if (t.dtype() == DType::boolean) {
    const bool* src = t.data<bool>();
    for (int64_t i = 0; i < t.numel(); ++i) out[data_at + static_cast<size_t>(i)] = src[i] ? 1 : 0;
  } else if (t.bytes() > 0) {
    std::memcpy(out.data() + data_at, t.raw(), t.bytes());
  }
  return out;
}

void write_npy(const std::string& path, const Tensor& tensor) {
  std::string bytes;
  try {
    bytes = encode_npy(tensor);
  } catch (const Error& e) {
    throw e.prefixed(path + ": ");
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error(path + ": cannot create file");
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) throw Error(path + ": write failed (disk full?)");
}

}  // namespace grove
