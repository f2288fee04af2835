#include "formats/packing.h"

#include "absl/strings/str_cat.h"

namespace lowp {

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

}  // namespace lowp
