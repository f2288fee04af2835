#include "tokenizer/sentencepiece_model.h"

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "tokenizer/charsmap.h"

namespace lowp {
namespace {

// Protobuf's wire format: a field is a varint key (number << 3 | wire type)
// and a varint (0), 8 bytes (1), a varint length and as many bytes (2), or 4
// bytes (5); groups (3, 4) are long deprecated and refused.
enum Wire { kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5 };

struct Field {
  uint32_t number = 0;
  int wire = 0;
  uint64_t varint = 0;      // kVarint
  absl::string_view bytes;  // kBytes, and the raw 4 or 8 bytes of kFixed32/64
};

class WireReader {
 public:
  explicit WireReader(absl::string_view b) : b_(b) {}
  bool done() const { return at_ == b_.size(); }

  // The next field; "" or why the bytes are not protobuf.
  std::string Next(Field& f) {
    uint64_t key = 0;
    if (!Varint(key)) return "a field's key is cut short or overlong";
    f.number = static_cast<uint32_t>(key >> 3);
    f.wire = static_cast<int>(key & 7);
    if (key >> 3 == 0 || key >> 3 > (uint64_t{1} << 29) - 1) return "a field number out of range";
    switch (f.wire) {
      case kVarint:
        if (!Varint(f.varint)) return "a varint is cut short or overlong";
        return "";
      case kFixed64:
      case kFixed32: {
        const size_t n = f.wire == kFixed64 ? 8 : 4;
        if (b_.size() - at_ < n) return "a fixed-size field is cut short";
        f.bytes = b_.substr(at_, n);
        at_ += n;
        return "";
      }
      case kBytes: {
        uint64_t n = 0;
        if (!Varint(n)) return "a length is cut short or overlong";
        if (n > b_.size() - at_) return "a length runs past the end";
        f.bytes = b_.substr(at_, static_cast<size_t>(n));
        at_ += static_cast<size_t>(n);
        return "";
      }
      default:
        return absl::StrCat("field ", f.number, " has wire type ", f.wire,
                            " (groups and unknown types are not read)");
    }
  }

 private:
  bool Varint(uint64_t& v) {
    v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (at_ == b_.size()) return false;
      const uint8_t c = static_cast<uint8_t>(b_[at_++]);
      v |= uint64_t{c & 0x7Fu} << shift;
      if (c < 0x80) return true;
    }
    return false;  // more than 10 bytes
  }

  absl::string_view b_;
  size_t at_ = 0;
};

// The fields kept (sentencepiece_model.proto of 0.1.97).
struct Piece {
  std::string text;
  std::optional<std::string> score;  // the float's 4 bytes, as stored
  std::optional<int32_t> type;       // NORMAL 1 .. BYTE 6
};
struct Model {
  std::vector<Piece> pieces;                                    // ModelProto 1
  bool has_trainer = false, has_normalizer = false;             // 2, 3
  std::optional<int32_t> model_type;                            // TrainerSpec 3
  std::optional<bool> treat_whitespace_as_suffix, byte_fallback;  // 24, 35
  std::optional<std::string> special[4];                        // 45..48: unk, bos, eos, pad
  std::optional<std::string> name, charsmap;                    // NormalizerSpec 1, 2
  std::optional<bool> normalizer_flags[3];  // 3..5: add_dummy_prefix, remove_extra_whitespaces,
                                            // escape_whitespaces
};
constexpr int kUserDefined = 4;

// The fields of one message: `take(field)` returns "" or an error for the
// fields it keeps, and std::nullopt for the ones it skips.
template <class Take>
std::string ReadMessage(absl::string_view bytes, absl::string_view what, Take&& take) {
  WireReader r(bytes);
  while (!r.done()) {
    Field f;
    if (std::string e = r.Next(f); !e.empty()) return absl::StrCat(what, ": ", e);
    std::optional<std::string> e = take(f);
    if (e && !e->empty()) return absl::StrCat(what, ": ", *e);
  }
  return "";
}

std::string WrongWire(const Field& f) {
  return absl::StrCat("field ", f.number, " has wire type ", f.wire);
}

// A protobuf enum as protobuf reads it: the varint cut to int32.
int32_t EnumValue(uint64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

std::string Parse(absl::string_view bytes, Model& m) {
  return ReadMessage(bytes, "ModelProto", [&](const Field& f) -> std::optional<std::string> {
    if (f.number < 1 || f.number > 5) return std::nullopt;
    if (f.wire != kBytes) return WrongWire(f);
    if (f.number == 1) {
      if (m.pieces.size() == SentencePieceLimits::kMaxPieces) {
        return absl::StrCat("more than ", SentencePieceLimits::kMaxPieces, " pieces");
      }
      Piece& p = m.pieces.emplace_back();
      return ReadMessage(f.bytes, absl::StrCat("piece ", m.pieces.size() - 1),
                         [&](const Field& g) -> std::optional<std::string> {
                           if (g.number == 1) {
                             if (g.wire != kBytes) return WrongWire(g);
                             p.text = std::string(g.bytes);
                           } else if (g.number == 2) {
                             if (g.wire != kFixed32) return WrongWire(g);
                             p.score = std::string(g.bytes);
                           } else if (g.number == 3) {
                             if (g.wire != kVarint) return WrongWire(g);
                             p.type = EnumValue(g.varint);
                           } else {
                             return std::nullopt;
                           }
                           return "";
                         });
    }
    if (f.number == 2) {
      m.has_trainer = true;
      return ReadMessage(f.bytes, "trainer_spec", [&](const Field& g) -> std::optional<std::string> {
        if (g.number == 3 || g.number == 24 || g.number == 35) {
          if (g.wire != kVarint) return WrongWire(g);
          if (g.number == 3) m.model_type = EnumValue(g.varint);
          if (g.number == 24) m.treat_whitespace_as_suffix = g.varint != 0;
          if (g.number == 35) m.byte_fallback = g.varint != 0;
          return "";
        }
        if (g.number >= 45 && g.number <= 48) {
          if (g.wire != kBytes) return WrongWire(g);
          m.special[g.number - 45] = std::string(g.bytes);
          return "";
        }
        return std::nullopt;
      });
    }
    if (f.number == 3) {
      m.has_normalizer = true;
      return ReadMessage(f.bytes, "normalizer_spec",
                         [&](const Field& g) -> std::optional<std::string> {
                           if (g.number == 1 || g.number == 2) {
                             if (g.wire != kBytes) return WrongWire(g);
                             (g.number == 1 ? m.name : m.charsmap) = std::string(g.bytes);
                             return "";
                           }
                           if (g.number >= 3 && g.number <= 5) {
                             if (g.wire != kVarint) return WrongWire(g);
                             m.normalizer_flags[g.number - 3] = g.varint != 0;
                             return "";
                           }
                           return std::nullopt;
                         });
    }
    // self_test_data (4) and denormalizer_spec (5): read as protobuf, not kept.
    return ReadMessage(f.bytes, f.number == 4 ? "self_test_data" : "denormalizer_spec",
                       [](const Field&) -> std::optional<std::string> { return std::nullopt; });
  });
}

std::string Check(const Model& m) {
  using L = SentencePieceLimits;
  if (m.model_type && (*m.model_type < 1 || *m.model_type > 4)) {
    return absl::StrCat("model_type ", *m.model_type, " is none of UNIGRAM 1, BPE 2, WORD 3, CHAR 4");
  }
  absl::flat_hash_set<absl::string_view> seen;
  absl::flat_hash_set<absl::string_view> user_defined;
  for (size_t i = 0; i < m.pieces.size(); ++i) {
    const Piece& p = m.pieces[i];
    if (p.type && (*p.type < 1 || *p.type > 6)) {
      return absl::StrCat("piece ", i, " has type ", *p.type, ", not a SentencePiece type (1..6)");
    }
    if (p.text.find('\0') != std::string::npos) return absl::StrCat("piece ", i, " holds a NUL byte");
    if (p.text.size() > L::kMaxPieceBytes) {
      return absl::StrCat("piece ", i, " is ", p.text.size(), " bytes long, above the limit of ",
                          L::kMaxPieceBytes);
    }
    if (!p.text.empty() && !seen.insert(p.text).second) {
      return absl::StrCat("piece ", i, " repeats an earlier piece");
    }
    if (p.type == kUserDefined) user_defined.insert(p.text);
  }
  // libsentencepiece's user-defined matcher keeps 64 matches on its stack.
  for (absl::string_view s : user_defined) {
    size_t prefixes = 0;
    for (size_t n = 1; n <= s.size(); ++n) prefixes += user_defined.contains(s.substr(0, n));
    if (prefixes > L::kMaxUserDefinedPrefixes) {
      return absl::StrCat("more than ", L::kMaxUserDefinedPrefixes,
                          " user-defined pieces are prefixes of one another");
    }
  }
  if (m.charsmap) {
    if (std::string e = CheckCharsmap(*m.charsmap); !e.empty()) {
      return absl::StrCat("normalizer_spec.precompiled_charsmap: ", e);
    }
  }
  return "";
}

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void PutKey(std::string& out, uint32_t number, Wire wire) {
  PutVarint(out, uint64_t{number} << 3 | wire);
}
void PutBytes(std::string& out, uint32_t number, absl::string_view bytes) {
  PutKey(out, number, kBytes);
  PutVarint(out, bytes.size());
  out.append(bytes.data(), bytes.size());
}
void PutInt(std::string& out, uint32_t number, int64_t v) {
  PutKey(out, number, kVarint);
  PutVarint(out, static_cast<uint64_t>(v));  // negative int32: ten bytes, as protobuf writes it
}

std::string Serialize(const Model& m) {
  std::string out, message;
  for (const Piece& p : m.pieces) {
    message.clear();
    PutBytes(message, 1, p.text);
    if (p.score) {
      PutKey(message, 2, kFixed32);
      message += *p.score;
    }
    if (p.type) PutInt(message, 3, *p.type);
    PutBytes(out, 1, message);
  }
  if (m.has_trainer) {
    message.clear();
    if (m.model_type) PutInt(message, 3, *m.model_type);
    if (m.treat_whitespace_as_suffix) PutInt(message, 24, *m.treat_whitespace_as_suffix);
    if (m.byte_fallback) PutInt(message, 35, *m.byte_fallback);
    for (uint32_t i = 0; i < 4; ++i) {
      if (m.special[i]) PutBytes(message, 45 + i, *m.special[i]);
    }
    PutBytes(out, 2, message);
  }
  if (m.has_normalizer) {
    message.clear();
    if (m.name) PutBytes(message, 1, *m.name);
    if (m.charsmap) PutBytes(message, 2, *m.charsmap);
    for (uint32_t i = 0; i < 3; ++i) {
      if (m.normalizer_flags[i]) PutInt(message, 3 + i, *m.normalizer_flags[i]);
    }
    PutBytes(out, 3, message);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> CheckedSentencePieceModel(absl::string_view bytes,
                                                      const std::string& file) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": not a SentencePiece model lowp can use: ", why));
  };
  if (bytes.size() > SentencePieceLimits::kMaxFileBytes) {
    return bad(absl::StrCat(bytes.size(), " bytes, above the limit of ",
                            SentencePieceLimits::kMaxFileBytes));
  }
  Model m;
  if (std::string e = Parse(bytes, m); !e.empty()) return bad(e);
  if (std::string e = Check(m); !e.empty()) return bad(e);
  return Serialize(m);
}

}  // namespace lowp
