// How codes lie in memory and in files: little-endian, one code per storage
// unit of Format::storage_bits(): 4-bit formats two codes per byte with the
// first code in the low nibble; up to 8 bits one byte (fp6 in the low six
// bits); up to 16 bits two bytes; up to 32 bits four bytes (tf32 is its
// 19-bit code, not a float32 bit pattern).
#ifndef LOWP_FORMATS_PACKING_H_
#define LOWP_FORMATS_PACKING_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "formats/format.h"

namespace lowp {

// Number of codes in `bytes` bytes, or InvalidArgument if `bytes` is not a
// whole number of storage units.
absl::StatusOr<size_t> CodeCount(const Format& format, size_t bytes);
// Bytes needed to store `count` codes (a trailing odd 4-bit code takes a
// byte whose high nibble is zero).
size_t StorageBytes(const Format& format, size_t count);

// Appends the codes stored in `bytes` to `codes`. A code with bits set above
// format.bits (an fp6 byte above 0x3F, say) is InvalidArgument naming its
// index, counted from `first_index`.
absl::Status UnpackCodes(const Format& format, std::span<const uint8_t> bytes, size_t first_index,
                         std::vector<uint32_t>* codes);
// Appends the storage of `codes` (each within format.bits) to `bytes`.
void PackCodes(const Format& format, std::span<const uint32_t> codes, std::vector<uint8_t>* bytes);

// Code i of the storage `bytes` (the layout above; i within its count).
inline uint32_t CodeAt(const Format& format, std::span<const uint8_t> bytes, size_t i) {
  switch (format.storage_bits()) {
    case 4:
      return (bytes[i / 2] >> ((i % 2) * 4)) & 0xF;
    case 8:
      return bytes[i];
    case 16:
      return uint32_t{bytes[2 * i]} | (uint32_t{bytes[2 * i + 1]} << 8);
    default:
      return uint32_t{bytes[4 * i]} | (uint32_t{bytes[4 * i + 1]} << 8) |
             (uint32_t{bytes[4 * i + 2]} << 16) | (uint32_t{bytes[4 * i + 3]} << 24);
  }
}

// Blocks of `block` elements along a row of `cols` (the last one short when
// block does not divide cols, but stored whole: it keeps a scale of its own).
inline int64_t BlocksPerRow(int64_t cols, int64_t block) { return (cols + block - 1) / block; }

// Calls f(g, begin, end) for every block of `elements` laid out in rows of
// `cols`: g counts blocks row after row, [begin, end) are its elements.
template <class F>
void ForEachBlock(int64_t elements, int64_t cols, int64_t block, F&& f) {
  if (cols <= 0 || block <= 0) return;
  const int64_t rows = elements / cols, per_row = BlocksPerRow(cols, block);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < per_row; ++b) {
      f(r * per_row + b, r * cols + b * block, r * cols + std::min(cols, (b + 1) * block));
    }
  }
}

// Codes one per element, as an array of unsigned integers (what NumPy holds).
// CodeBytes: the narrowest such integer that holds one code of `format`: 1,
// 2 or 4 bytes (a 4-bit code takes a byte of its own).
size_t CodeBytes(const Format& format);
// `count` codes in native-endian unsigned integers of `itemsize` bytes (1, 2,
// 4 or 8) into the storage layout at `storage` (StorageBytes(format, count)
// bytes, zeroed by the call). InvalidArgument naming the first code wider
// than the format.
absl::Status StoreCodes(const Format& format, const void* codes, size_t itemsize, size_t count,
                        std::span<uint8_t> storage);
// The reverse for codes the storage holds: `count` codes into `codes`, in
// unsigned integers of CodeBytes(format) bytes. `codes` may start where
// `storage` does (codes spread in place over their own storage).
void LoadCodes(const Format& format, std::span<const uint8_t> storage, size_t count, void* codes);

}  // namespace lowp

#endif  // LOWP_FORMATS_PACKING_H_
