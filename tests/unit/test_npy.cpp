// .npy reading and writing: round trips, the header versions NumPy writes, and a clear
// Error naming the file for every malformed or unsupported file.
#include <gtest/gtest.h>

#include <limits>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "npy/npy.h"

namespace grove {
namespace {

std::span<const std::byte> as_bytes(const std::string& s) { return std::as_bytes(std::span(s.data(), s.size())); }

// A .npy file from parts: version, header text (padding is added) and raw data.
std::string make_npy(int major, const std::string& header, const std::string& data) {
  std::string h = header + "\n";
  std::string out = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  size_t len = h.size();
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) out += static_cast<char>((len >> (8 * i)) & 0xff);
  return out + h + data;
}

std::string floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

// The Error message from parsing `bytes` as "f.npy"; fails the test when parsing succeeds.
std::string parse_error(const std::string& bytes) {
  try {
    parse_npy(as_bytes(bytes), "f.npy");
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind("f.npy: ", 0), 0u) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "parsed without error";
  return "";
}

TEST(Npy, ParsesVersion1FloatArray) {
  auto t = parse_npy(as_bytes(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                                       floats({1, 2, 3, 4, 5, 6}))),
                     "f.npy");
  ASSERT_EQ(t.dtype(), DType::f32);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.data<float>()[0], 1.f);
  EXPECT_EQ(t.data<float>()[5], 6.f);
}

TEST(Npy, ParsesVersions2And3AndOddSpacing) {
  for (int major : {2, 3}) {
    auto t = parse_npy(as_bytes(make_npy(major, "{\"shape\":(3,),\"fortran_order\":False,\"descr\":\"<f4\"}   ",
                                         floats({7, 8, 9}))),
                       "f.npy");
    EXPECT_EQ(t.shape(), (Shape{3}));
    EXPECT_EQ(t.data<float>()[2], 9.f);
  }
}

TEST(Npy, ScalarAndEmptyAndPython2Longs) {
  auto s = parse_npy(as_bytes(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", floats({4}))), "f.npy");
  EXPECT_EQ(s.rank(), 0);
  EXPECT_EQ(s.data<float>()[0], 4.f);
  auto e = parse_npy(as_bytes(make_npy(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (0, 5), }", "")), "f.npy");
  EXPECT_EQ(e.shape(), (Shape{0, 5}));
  auto l = parse_npy(as_bytes(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1L, 2L), }", floats({1, 2}))), "f.npy");
  EXPECT_EQ(l.shape(), (Shape{1, 2}));
}

TEST(Npy, BoolBytesOtherThanOneAreTrue) {
  std::string data = {0, 1, 2};
  auto t = parse_npy(as_bytes(make_npy(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }", data)), "f.npy");
  ASSERT_EQ(t.dtype(), DType::boolean);
  EXPECT_FALSE(t.data<bool>()[0]);
  EXPECT_TRUE(t.data<bool>()[1]);
  EXPECT_TRUE(t.data<bool>()[2]);
}

TEST(Npy, FortranOrderOfRankOneIsFine) {
  auto t = parse_npy(as_bytes(make_npy(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", floats({1, 2}))), "f.npy");
  EXPECT_EQ(t.shape(), (Shape{2}));
}

TEST(Npy, RoundTripsEveryWrittenDtype) {
  auto check = [](const Tensor& t) {
    std::string bytes = encode_npy(t);
    EXPECT_EQ(bytes.compare(0, 6, "\x93NUMPY"), 0);
    size_t header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
    EXPECT_EQ((10 + header_len) % 64, 0u) << "data must start 64-byte aligned";
    EXPECT_EQ(bytes[10 + header_len - 1], '\n');
    Tensor back = parse_npy(as_bytes(bytes), "t.npy");
    EXPECT_EQ(back.dtype(), t.dtype());
    EXPECT_EQ(back.shape(), t.shape());
    EXPECT_EQ(back.to_f64(), t.to_f64());
  };
  check(Tensor::from<float>({2, 2}, std::vector<float>{1.5f, -2, 0, 3e8f}));
  check(Tensor::from<int64_t>({3}, std::vector<int64_t>{-1, 1LL << 40, 7}));
  check(Tensor::from<int32_t>({1, 1, 2}, std::vector<int32_t>{-5, 6}));
  check(Tensor::from<uint8_t>({2}, std::vector<uint8_t>{0, 255}));
  check(Tensor::from<double>({1}, std::vector<double>{0.1}));
  check(Tensor::scalar<float>(2.5f));
  check(Tensor(DType::f32, {0, 4}));
  Tensor b(DType::boolean, {3});
  b.data<bool>()[1] = true;
  check(b);
}

TEST(Npy, EncodesTheHeaderNumPyWrites) {
  std::string bytes = encode_npy(Tensor(DType::i64, {5}));
  EXPECT_EQ(bytes[6], 1);
  EXPECT_NE(bytes.find("{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }"), std::string::npos);
  EXPECT_NE(encode_npy(Tensor(DType::boolean, {1, 2})).find("'descr': '|b1'"), std::string::npos);
  EXPECT_NE(encode_npy(Tensor::scalar<float>(1)).find("'shape': ()"), std::string::npos);
}

TEST(Npy, WritesAndReadsFiles) {
  auto path = (std::filesystem::temp_directory_path() / "grove_test_npy_roundtrip.npy").string();
  write_npy(path, Tensor::from<float>({2}, std::vector<float>{3, 4}));
  Tensor t = read_npy(path);
  EXPECT_EQ(t.data<float>()[1], 4.f);
  std::filesystem::remove(path);
}

TEST(Npy, FileErrorsNameTheFile) {
  auto missing = (std::filesystem::temp_directory_path() / "grove_no_such_file.npy").string();
  try {
    read_npy(missing);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  EXPECT_THROW(write_npy("/nonexistent_dir/x.npy", Tensor(DType::f32, {1})), Error);
  EXPECT_THROW(encode_npy(Tensor(DType::string, {1})), Error);
}

TEST(Npy, Float16RoundTrips) {
  Tensor h(DType::f16, {3});
  uint16_t* bits = reinterpret_cast<uint16_t*>(h.raw());
  bits[0] = 0x3c00, bits[1] = 0xc000, bits[2] = 0x7c00;  // 1, -2, inf
  std::string bytes = encode_npy(h);
  EXPECT_NE(bytes.find("'<f2'"), std::string::npos);
  Tensor back = parse_npy(as_bytes(bytes), "h.npy");
  ASSERT_EQ(back.dtype(), DType::f16);
  EXPECT_EQ(back.to_f64(), (std::vector<double>{1.0, -2.0, std::numeric_limits<double>::infinity()}));
}

TEST(Npy, RejectsBadMagicAndVersion) {
  EXPECT_NE(parse_error("").find("not a .npy"), std::string::npos);
  EXPECT_NE(parse_error("PK\x03\x04zipfile").find("not a .npy"), std::string::npos);
  std::string v4 = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", floats({1}));
  v4[6] = 4;
  EXPECT_NE(parse_error(v4).find("version 4.0"), std::string::npos);
}

TEST(Npy, RejectsTruncatedHeaders) {
  std::string good = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", floats({1}));
  EXPECT_NE(parse_error(good.substr(0, 9)).find("truncated"), std::string::npos);
  EXPECT_NE(parse_error(good.substr(0, 30)).find("truncated"), std::string::npos);
  std::string v2 = make_npy(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", "");
  EXPECT_NE(parse_error(v2.substr(0, 10)).find("truncated"), std::string::npos);
}

TEST(Npy, RejectsMalformedHeaders) {
  const char* bad[] = {
      "{'descr' '<f4', 'fortran_order': False, 'shape': (1,), }",          // no colon
      "{'descr': '<f4, 'fortran_order': False, 'shape': (1,), }",          // unbalanced quote
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), ",          // no closing brace
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } junk",    // trailing text
      "{'descr': '<f4', 'fortran_order': false, 'shape': (1,), }",         // not Python's False
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1 2), }",        // no comma in tuple
      "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }",        // negative dim
      "{'descr': '<f4', 'fortran_order': False, 'shape': [1], }",          // list, not tuple
      "{'descr': '<f4', 'fortran_order': False}",                          // no shape
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",   // unknown key
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'shape': (1,)}",  // duplicate
      "{'descr': 4, 'fortran_order': False, 'shape': (1,), }",             // descr not a string
      "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }",             // fortran_order not bool
      "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",  // overflow
      "not a dict",
  };
  for (const char* header : bad) {
    SCOPED_TRACE(header);
    std::string msg = parse_error(make_npy(1, header, floats({1})));
    EXPECT_NE(msg.find("header"), std::string::npos) << msg;
  }
}

TEST(Npy, RejectsUnsupportedLayoutsAndDtypes) {
  auto with_descr = [](const std::string& descr, const std::string& order = "False") {
    return make_npy(1, "{'descr': '" + descr + "', 'fortran_order': " + order + ", 'shape': (2, 2), }", std::string(32, '\0'));
  };
  EXPECT_NE(parse_error(with_descr("<f4", "True")).find("Fortran"), std::string::npos);
  EXPECT_NE(parse_error(with_descr(">f4")).find("big-endian"), std::string::npos);
  EXPECT_NE(parse_error(with_descr("<f16")).find("'<f16' is not supported"), std::string::npos);  // float128
  EXPECT_NE(parse_error(with_descr("<c8")).find("not supported"), std::string::npos);
  EXPECT_NE(parse_error(with_descr("<U4")).find("not supported"), std::string::npos);
  EXPECT_NE(parse_error(with_descr("|O")).find("not supported"), std::string::npos);
  std::string structured =
      make_npy(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", floats({1}));
  EXPECT_NE(parse_error(structured).find("structured"), std::string::npos);
}

TEST(Npy, RejectsDataOfTheWrongLength) {
  const std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
  std::string msg = parse_error(make_npy(1, header, floats({1, 2, 3})));
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  EXPECT_NE(msg.find("16"), std::string::npos) << msg;
  EXPECT_NE(parse_error(make_npy(1, header, floats({1, 2, 3, 4, 5}))).find("extra bytes"), std::string::npos);
  // A shape whose byte count overflows must not allocate.
  std::string huge = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 8), }", "");
  EXPECT_NE(parse_error(huge).find("too large"), std::string::npos);
  std::string big = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (100000000000,), }", "");
  EXPECT_NE(parse_error(big).find("truncated"), std::string::npos);
}

}  // namespace
}  // namespace grove
