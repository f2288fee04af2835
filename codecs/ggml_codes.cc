// Element codes of ggml's block types, one element at a time: where each
// element's code lives in its block's bytes (codecs/ggml_blocks.h gives the
// layouts). What a caller that picks codes itself needs (GPTQ, quant/rounder.cc):
// the values a block can give an element (set every code to c and decode),
// and the block's bytes once it has chosen.
#include <cstddef>
#include <cstdint>
#include <span>

#include "absl/strings/str_cat.h"
#include "codecs/ggml.h"
#include "codecs/ggml_blocks.h"

namespace lowp::ggml {
namespace {

// Sets bits [shift, shift + bits) of byte `b` to `value`.
void SetBits(uint8_t& b, int shift, int bits, int value) {
  const int mask = ((1 << bits) - 1) << shift;
  b = static_cast<uint8_t>((b & ~mask) | ((value << shift) & mask));
}

// q4_0's nibbles (q4_1, q5_0, q5_1, iq4_nl, mxfp4 and each group of 32 of
// iq4_xs): element j < 16 the low nibble of qs[j], j >= 16 the high nibble
// of qs[j - 16].
void SetNibble32(uint8_t* qs, int j, int code) { SetBits(qs[j % 16], j < 16 ? 0 : 4, 4, code); }

// q5_0's and q5_1's bit 4 of element j: bit j of the little-endian qh.
void SetHighBit32(uint8_t* qh, int j, int code) { SetBits(qh[j / 8], j % 8, 1, code >> 4); }

// q2_K's and q3_K's low 2 bits: element 128 h + 32 s + l in bits 2s of qs[32 h + l].
void SetLow2K(uint8_t* qs, int e, int code) {
  const int h = e / 128, s = e % 128 / 32, l = e % 32;
  SetBits(qs[32 * h + l], 2 * s, 2, code);
}

// The bytes of field `offset` of a block (offsetof: blocks are read and
// written as bytes, at any alignment).
uint8_t* At(std::span<uint8_t> block, size_t offset) { return block.data() + offset; }

}  // namespace

int CodeCount(Type type) {
  switch (type) {
    case Type::kQ4_0:
    case Type::kQ4_1:
    case Type::kQ4_K:
    case Type::kIQ4_NL:
    case Type::kIQ4_XS:
    case Type::kMXFP4:
    case Type::kNVFP4:
      return 16;
    case Type::kQ5_0:
    case Type::kQ5_1:
    case Type::kQ5_K:
      return 32;
    case Type::kQ8_0:
      return 256;
    case Type::kQ2_K:
      return 4;
    case Type::kQ3_K:
      return 8;
    case Type::kQ6_K:
      return 64;
    default:
      return 0;
  }
}

namespace {

// Writes code c of element e into `block` (sizes checked by the caller).
void PutCode(Type type, std::span<uint8_t> block, int e, int c) {
  switch (type) {
    case Type::kQ4_0:
      SetNibble32(At(block, offsetof(BlockQ4_0, qs)), e, c);
      break;
    case Type::kQ4_1:
      SetNibble32(At(block, offsetof(BlockQ4_1, qs)), e, c);
      break;
    case Type::kIQ4_NL:
      SetNibble32(At(block, offsetof(BlockIq4Nl, qs)), e, c);
      break;
    case Type::kMXFP4:
      SetNibble32(At(block, offsetof(BlockMxfp4, qs)), e, c);
      break;
    case Type::kQ5_0:
      SetNibble32(At(block, offsetof(BlockQ5_0, qs)), e, c & 15);
      SetHighBit32(At(block, offsetof(BlockQ5_0, qh)), e, c);
      break;
    case Type::kQ5_1:
      SetNibble32(At(block, offsetof(BlockQ5_1, qs)), e, c & 15);
      SetHighBit32(At(block, offsetof(BlockQ5_1, qh)), e, c);
      break;
    case Type::kQ8_0:
      At(block, offsetof(BlockQ8_0, qs))[e] = static_cast<uint8_t>(c ^ 0x80);  // int8 c - 128
      break;
    case Type::kIQ4_XS:
      SetNibble32(At(block, offsetof(BlockIq4Xs, qs)) + 16 * (e / 32), e % 32, c);
      break;
    case Type::kNVFP4: {
      const int s = e / 16, k = e % 16;
      SetBits(At(block, offsetof(BlockNvfp4, qs))[8 * s + k % 8], k < 8 ? 0 : 4, 4, c);
      break;
    }
    case Type::kQ2_K:
      SetLow2K(At(block, offsetof(BlockQ2_K, qs)), e, c);
      break;
    case Type::kQ3_K:
      SetLow2K(At(block, offsetof(BlockQ3_K, qs)), e, c & 3);
      SetBits(At(block, offsetof(BlockQ3_K, hmask))[e % 32], e / 32, 1, c >> 2);
      break;
    case Type::kQ4_K:
    case Type::kQ5_K: {
      // Elements 64 c + l and 64 c + 32 + l: the low and high nibbles of qs[32 c + l].
      const int chunk = e / 64, l = e % 32, high = e % 64 / 32;
      uint8_t* qs =
          At(block, type == Type::kQ4_K ? offsetof(BlockQ4_K, qs) : offsetof(BlockQ5_K, qs));
      SetBits(qs[32 * chunk + l], 4 * high, 4, c & 15);
      if (type == Type::kQ5_K) {
        SetBits(At(block, offsetof(BlockQ5_K, qh))[l], 2 * chunk + high, 1, c >> 4);
      }
      break;
    }
    case Type::kQ6_K: {
      const int h = e / 128, s = e % 128 / 32, l = e % 32;
      SetBits(At(block, offsetof(BlockQ6_K, ql))[64 * h + l + 32 * (s & 1)], s < 2 ? 0 : 4, 4,
              c & 15);
      SetBits(At(block, offsetof(BlockQ6_K, qh))[32 * h + l], 2 * s, 2, c >> 4);
      break;
    }
    default:
      break;
  }
}

// InvalidArgument for a type without element codes or a block of the wrong size.
absl::Status CheckBlock(Type type, std::span<const uint8_t> block) {
  const TypeInfo& info = Info(type);
  if (CodeCount(type) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(info.name, " does not choose its codes one element at a time"));
  }
  if (static_cast<int64_t>(block.size()) != info.bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(info.name, ": a ", block.size(), "-byte block is not ", info.bytes, " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SetCode(Type type, std::span<uint8_t> block, int element, int code) {
  if (absl::Status s = CheckBlock(type, block); !s.ok()) return s;
  const TypeInfo& info = Info(type);
  if (element < 0 || element >= info.block || code < 0 || code >= CodeCount(type)) {
    return absl::InvalidArgumentError(absl::StrCat(info.name, ": element ", element, " code ", code,
                                                   " of a block is out of range"));
  }
  PutCode(type, block, element, code);
  return absl::OkStatus();
}

absl::Status SetCodes(Type type, std::span<uint8_t> block, std::span<const uint8_t> codes) {
  if (absl::Status s = CheckBlock(type, block); !s.ok()) return s;
  const TypeInfo& info = Info(type);
  const int count = CodeCount(type);
  if (static_cast<int64_t>(codes.size()) != info.block) {
    return absl::InvalidArgumentError(
        absl::StrCat(info.name, ": ", codes.size(), " codes for a block of ", info.block));
  }
  for (size_t e = 0; e < codes.size(); ++e) {
    if (codes[e] >= count) {
      return absl::InvalidArgumentError(
          absl::StrCat(info.name, ": code ", codes[e], " of element ", e, " is out of range"));
    }
  }
  for (size_t e = 0; e < codes.size(); ++e) PutCode(type, block, static_cast<int>(e), codes[e]);
  return absl::OkStatus();
}

}  // namespace lowp::ggml
