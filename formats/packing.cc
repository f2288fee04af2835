#include "formats/packing.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace lowp {
namespace {

template <typename In>
absl::Status StoreAs(const Format& format, const In* in, size_t n, uint8_t* out) {
  const uint64_t mask = format.code_mask();
  const int unit = format.storage_bits();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t v = in[i];
    if (v > mask) {
      return absl::InvalidArgumentError(absl::StrCat("code ", v, " at index ", i, " is wider than ",
                                                     format.name, "'s ", format.bits, " bits"));
    }
    switch (unit) {
      case 4:
        out[i / 2] |= static_cast<uint8_t>(v << (4 * (i % 2)));
        break;
      case 8:
        out[i] = static_cast<uint8_t>(v);
        break;
      case 16: {
        const uint16_t u = static_cast<uint16_t>(v);
        std::memcpy(out + 2 * i, &u, 2);
        break;
      }
      default: {
        const uint32_t u = static_cast<uint32_t>(v);
        std::memcpy(out + 4 * i, &u, 4);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<size_t> CodeCount(const Format& format, size_t bytes) {
  const int unit = format.storage_bits();
  if (unit == 4) return bytes * 2;
  const size_t unit_bytes = static_cast<size_t>(unit / 8);
  if (bytes % unit_bytes != 0) {
    return absl::InvalidArgumentError(absl::StrCat(bytes, " bytes is not a whole number of ",
                                                   format.name, " codes (", unit_bytes,
                                                   " bytes each)"));
  }
  return bytes / unit_bytes;
}

size_t StorageBytes(const Format& format, size_t count) {
  const int unit = format.storage_bits();
  if (unit == 4) return (count + 1) / 2;
  return count * static_cast<size_t>(unit / 8);
}

absl::Status UnpackCodes(const Format& format, std::span<const uint8_t> bytes, size_t first_index,
                         std::vector<uint32_t>* codes) {
  const int unit = format.storage_bits();
  const size_t start = codes->size();
  if (unit == 4) {
    for (uint8_t byte : bytes) {
      codes->push_back(byte & 0xF);
      codes->push_back(byte >> 4);
    }
  } else {
    const size_t unit_bytes = static_cast<size_t>(unit / 8);
    for (size_t i = 0; i + unit_bytes <= bytes.size(); i += unit_bytes) {
      uint32_t code = 0;
      for (size_t b = 0; b < unit_bytes; ++b) {
        code |= uint32_t{bytes[i + b]} << (8 * b);
      }
      codes->push_back(code);
    }
  }
  const uint32_t mask = format.code_mask();
  for (size_t i = start; i < codes->size(); ++i) {
    if (((*codes)[i] & ~mask) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("element ", first_index + (i - start), ": 0x", absl::Hex((*codes)[i]),
                       " is not a ", format.name, " code (", format.bits, " bits)"));
    }
  }
  return absl::OkStatus();
}

void PackCodes(const Format& format, std::span<const uint32_t> codes, std::vector<uint8_t>* bytes) {
  const int unit = format.storage_bits();
  if (unit == 4) {
    for (size_t i = 0; i < codes.size(); i += 2) {
      const uint32_t high = i + 1 < codes.size() ? codes[i + 1] : 0;
      bytes->push_back(static_cast<uint8_t>(codes[i] | (high << 4)));
    }
    return;
  }
  const size_t unit_bytes = static_cast<size_t>(unit / 8);
  for (uint32_t code : codes) {
    for (size_t b = 0; b < unit_bytes; ++b) {
      bytes->push_back(static_cast<uint8_t>(code >> (8 * b)));
    }
  }
}

size_t CodeBytes(const Format& format) {
  return static_cast<size_t>(std::max(1, format.storage_bits() / 8));
}

absl::Status StoreCodes(const Format& format, const void* codes, size_t itemsize, size_t count,
                        std::span<uint8_t> storage) {
  if (storage.size() != StorageBytes(format, count)) {
    return absl::InvalidArgumentError(absl::StrCat(count, " ", format.name, " codes take ",
                                                   StorageBytes(format, count), " bytes, not ",
                                                   storage.size()));
  }
  std::fill(storage.begin(), storage.end(), uint8_t{0});
  switch (itemsize) {
    case 1:
      return StoreAs(format, static_cast<const uint8_t*>(codes), count, storage.data());
    case 2:
      return StoreAs(format, static_cast<const uint16_t*>(codes), count, storage.data());
    case 4:
      return StoreAs(format, static_cast<const uint32_t*>(codes), count, storage.data());
    case 8:
      return StoreAs(format, static_cast<const uint64_t*>(codes), count, storage.data());
    default:
      return absl::InvalidArgumentError(absl::StrCat("codes of ", itemsize, " bytes each"));
  }
}

void LoadCodes(const Format& format, std::span<const uint8_t> storage, size_t count, void* codes) {
  const int unit = format.storage_bits();
  uint8_t* out = static_cast<uint8_t*>(codes);
  if (unit == 4) {
    // Back to front: in place, byte i / 2 is read before byte i is written.
    for (size_t i = count; i-- > 0;) out[i] = (storage[i / 2] >> (4 * (i % 2))) & 0xF;
    return;
  }
  // Every other layout is one code per unit of CodeBytes(format) bytes
  // (storage_bits() is 8, 16 or 32), little-endian as this machine.
  std::memmove(out, storage.data(), std::min(storage.size(), count * CodeBytes(format)));
}

}  // namespace lowp
