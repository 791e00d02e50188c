#pragma once
// NumPy .npy files: the way tensors get in and out of the `grove` command.
//
// Reads header versions 1.0, 2.0 and 3.0, little-endian (or byte-order-free) C-order arrays of
// float32 '<f4', float64 '<f8', int64 '<i8', int32 '<i4', int16 '<i2', int8 '|i1',
// uint8..uint64 and bool '|b1'. Anything else (Fortran order, big-endian, float16, complex,
// strings, objects, structured dtypes, a malformed header, data shorter or longer than the
// shape says) is a grove::Error naming the file and what is wrong.
//
// Writes version 1.0 (2.0 when the header would not fit), with the header padded so the data
// starts on a 64-byte boundary, as NumPy does.
#include <cstddef>
#include <span>
#include <string>

#include "graph/tensor.h"

namespace grove {

// Loads a .npy file. `path` names the file in every message.
Tensor read_npy(const std::string& path);

// Parses .npy bytes held in memory; `path` is only used in messages.
Tensor parse_npy(std::span<const std::byte> bytes, const std::string& path);

// The complete .npy encoding of a tensor (header and data).
std::string encode_npy(const Tensor& tensor);

// Writes a tensor as a .npy file; throws an Error naming the file when it cannot be written.
void write_npy(const std::string& path, const Tensor& tensor);

}  // namespace grove
