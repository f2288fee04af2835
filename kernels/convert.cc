// The public API of the kernels: validates a call once, derives the plan
// (most of its constants straight from the scalar reference, so that the two
// cannot drift apart), splits large arrays across threads and runs the
// dispatched kernel.
#include "kernels/convert.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "formats/packing.h"
#include "hwy/highway.h"
#include "kernels/dispatch.h"
#include "kernels/plan.h"
#include "kernels/thread_pool.h"

namespace lowp {
namespace {

using kernels::DecodePlan;
using kernels::EncodePlan;
using kernels::Source;
using kernels::Storage;

// Below this many elements an array is not worth a thread.
constexpr size_t kMinElementsPerThread = size_t{1} << 18;
// Outputs at least this large (beyond this machine class's last-level cache)
// are written with non-temporal stores where the kernel has them (the fp16
// and bf16 paths, decoding): they would evict the input for nothing.
constexpr size_t kStreamBytes = size_t{32} << 20;

// Elements to convert before `out` + that many units of `unit` bytes is
// 64-byte aligned; `count` (stream nothing) if it never is.
size_t HeadBeforeAlignment(const void* out, size_t unit, size_t count) {
  const auto address = reinterpret_cast<uintptr_t>(out);
  if (address % unit != 0) return count;
  return std::min(count, (64 - address % 64) % 64 / unit);
}

Storage StorageOf(const Format& f) {
  switch (f.storage_bits()) {
    case 4:
      return Storage::kNibble;
    case 8:
      return Storage::kByte;
    case 16:
      return Storage::kHalf;
    default:
      return Storage::kWord;
  }
}

uint32_t Bits(float x) { return std::bit_cast<uint32_t>(x); }

bool IsFloat16(const Format& f) {
  return f.is_float() && f.specials == SpecialEncoding::kIeee && f.exponent_bits == 5 &&
         f.mantissa_bits == 10 && f.bias == 15;
}
bool IsBFloat16(const Format& f) {
  return f.is_float() && f.specials == SpecialEncoding::kIeee && f.exponent_bits == 8 &&
         f.mantissa_bits == 7 && f.bias == 127;
}

// How a format is decoded: a table for up to 8 bits, arithmetic for the
// rest, the reference itself for the odd user-defined format neither covers.
struct Decoder {
  DecodePlan plan;
  std::vector<float> table;
  bool scalar = false;
};

Decoder MakeDecoder(const Format& from) {
  Decoder d;
  DecodePlan& p = d.plan;
  p.storage = StorageOf(from);
  p.is_int = !from.is_float();
  p.is_signed = from.is_signed;
  p.bits = from.bits;
  p.m = from.mantissa_bits;
  p.mag_mask = from.magnitude_mask();
  p.sign_mask = from.sign_mask();
  p.specials = static_cast<int32_t>(from.specials);
  // Codes of up to 8 bits decode through a table, except byte codes the
  // arithmetic below handles (integers; floats with zero whose values are
  // float32 normals or subnormals of float32's grid): it is faster than the
  // scalar table loop (fp8_e4m3fn: 0.35 vs 0.48 ns a code on the bench VM).
  const int subnormal_exponent = from.min_normal_exponent() - from.mantissa_bits;
  const bool arithmetic =
      !from.is_float() || (from.has_zero && from.exponent_bits <= 8 && subnormal_exponent >= -126 &&
                           from.min_normal_exponent() >= -126);
  if (from.bits <= 8 && (p.storage == Storage::kNibble || !arithmetic)) {
    d.table.assign(256, 0.0f);
    for (uint32_t c = 0; c <= from.code_mask(); ++c) d.table[c] = DecodeToFloat32(from, c);
    p.use_table = true;
    p.table = d.table.data();
    return d;
  }
  if (p.is_int) return d;
  p.shift_only = from.exponent_bits == 8 && from.bias == 127 && from.has_zero &&
                 from.specials == SpecialEncoding::kIeee;
  if (!p.shift_only && (!from.has_zero || from.exponent_bits > 8 || subnormal_exponent < -126 ||
                        from.min_normal_exponent() < -126)) {
    d.scalar = true;
    return d;
  }
  p.f16c = IsFloat16(from);
  p.rebias = static_cast<uint32_t>(127 - from.bias) << 23;
  if (!p.shift_only) p.subnormal_scale = Bits(std::ldexp(1.0f, subnormal_exponent));
  p.all_ones_field = (1u << from.exponent_bits) - 1;
  return d;
}

int ThreadCount(const RunOptions& run, size_t count) {
  const int threads = ResolveThreads(run.threads);
  const size_t useful = std::max<size_t>(1, count / kMinElementsPerThread);
  return static_cast<int>(std::min<size_t>(threads, useful));
}

// Runs body(part, begin, end) over `parts` pieces of [0, count) whose
// boundaries are multiples of 64 elements (whole bytes of 4-bit codes).
template <class Body>
void ForParts(size_t count, int parts, Body body) {
  if (parts <= 1) {
    body(0, 0, count);
    return;
  }
  const size_t step = (count / parts + 63) / 64 * 64;
  ParallelFor(static_cast<size_t>(parts), parts, [&](size_t t) {
    const size_t begin = std::min(count, step * t);
    const size_t end =
        t + 1 == static_cast<size_t>(parts) ? count : std::min(count, step * (t + 1));
    body(static_cast<int>(t), begin, end);
  });
}

size_t StorageOffset(Storage s, size_t index) {
  switch (s) {
    case Storage::kNibble:
      return index / 2;
    case Storage::kByte:
      return index;
    case Storage::kHalf:
      return index * 2;
    case Storage::kWord:
      return index * 4;
  }
  return index;
}

bool Overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a);
  const auto y = reinterpret_cast<uintptr_t>(b);
  return x < y + b_bytes && y < x + a_bytes;
}

absl::Status CheckOutput(const Format& to, size_t count, size_t out_bytes) {
  const size_t need = StorageBytes(to, count);
  if (out_bytes != need) {
    return absl::InvalidArgumentError(absl::StrCat("output holds ", out_bytes, " bytes; ", count,
                                                   " codes of ", to.name, " take ", need));
  }
  return absl::OkStatus();
}

// In place is allowed when input and output start at the same byte and each
// code takes no more room than its input; any other overlap is refused.
absl::Status CheckAliasing(const void* in, size_t in_bytes, const uint8_t* out, size_t out_bytes,
                           bool may_share_start) {
  if (in_bytes == 0 || out_bytes == 0 || !Overlap(in, in_bytes, out, out_bytes)) {
    return absl::OkStatus();
  }
  if (may_share_start && in == out) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "input and output overlap (only in-place narrowing is allowed)");
}

absl::Status RunEncode(const Format& to, const void* in, size_t count, size_t unit,
                       std::span<uint8_t> out, const ConvertOptions& o, const RunOptions& run,
                       Source source) {
  if (absl::Status s = ValidateOptions(to, o); !s.ok()) return s;
  if (absl::Status s = CheckOutput(to, count, out.size()); !s.ok()) return s;
  const bool narrowing = to.storage_bits() <= static_cast<int>(unit * 8);
  if (absl::Status s = CheckAliasing(in, count * unit, out.data(), out.size(), narrowing);
      !s.ok()) {
    return s;
  }
  EncodePlan plan = MakeEncodePlan(to, o, source);
  const bool in_place = static_cast<const void*>(out.data()) == in;
  size_t head = 0;
  if ((plan.f16c || plan.bf16) && out.size() >= kStreamBytes && !in_place) {
    head = HeadBeforeAlignment(out.data(), 2, count);
    kernels::DispatchEncode(plan, in, head, run.first_index, out.data());
    plan.stream = true;
  }
  const auto* rest = static_cast<const uint8_t*>(in) + head * unit;
  uint8_t* rest_out = out.data() + StorageOffset(plan.storage, head);
  // In place runs on one thread: a later part's output would overwrite an
  // earlier part's unread input.
  const int parts = in_place ? 1 : ThreadCount(run, count - head);
  ForParts(count - head, parts, [&](int, size_t begin, size_t end) {
    kernels::DispatchEncode(plan, rest + begin * unit, end - begin, run.first_index + head + begin,
                            rest_out + StorageOffset(plan.storage, begin));
  });
  return absl::OkStatus();
}

// The first code with bits above the format's width, or -1.
int64_t FirstInvalidCode(const Format& f, std::span<const uint8_t> in, size_t count) {
  const uint32_t mask = f.code_mask();
  switch (StorageOf(f)) {
    case Storage::kNibble:
      if (mask == 0xF) return -1;
      for (size_t i = 0; i < count; ++i) {
        if ((((in[i / 2] >> (4 * (i % 2))) & 0xF) & ~mask) != 0) return static_cast<int64_t>(i);
      }
      return -1;
    case Storage::kByte:
      if (mask == 0xFF) return -1;
      for (size_t i = 0; i < count; ++i) {
        if ((in[i] & ~mask) != 0) return static_cast<int64_t>(i);
      }
      return -1;
    case Storage::kHalf:
      if (mask == 0xFFFF) return -1;
      for (size_t i = 0; i < count; ++i) {
        uint16_t c;
        std::memcpy(&c, in.data() + 2 * i, 2);
        if ((c & ~mask) != 0) return static_cast<int64_t>(i);
      }
      return -1;
    case Storage::kWord:
      if (mask == 0xFFFFFFFFu) return -1;
      for (size_t i = 0; i < count; ++i) {
        uint32_t c;
        std::memcpy(&c, in.data() + 4 * i, 4);
        if ((c & ~mask) != 0) return static_cast<int64_t>(i);
      }
      return -1;
  }
  return -1;
}

}  // namespace

namespace kernels {

EncodePlan MakeEncodePlan(const Format& to, const ConvertOptions& o, Source source) {
  EncodePlan p;
  p.rounding = static_cast<int32_t>(o.rounding);
  p.storage = StorageOf(to);
  p.source = source;
  p.is_int = !to.is_float();
  p.is_signed = to.is_signed;
  p.daz = o.subnormals == Subnormals::kInputsAreZero || o.subnormals == Subnormals::kFlushBoth;
  p.ftz = o.subnormals == Subnormals::kFlushToZero || o.subnormals == Subnormals::kFlushBoth;
  p.keep_payload = o.nan == NanPolicy::kKeepPayload && to.specials == SpecialEncoding::kIeee;
  p.has_zero = to.has_zero;
  p.plain_zero = !to.is_float() || to.has_negative_zero();
  p.bits = to.bits;
  p.m = to.mantissa_bits;
  if (p.is_int) {
    p.quantum_m = 256;  // quantum 0 for every float32 exponent
    p.quantum_min = 0;
    p.int_lowest = to.is_signed ? -(1 << (to.bits - 1)) : 0;
    p.int_highest = to.is_signed ? (1 << (to.bits - 1)) - 1 : (1 << to.bits) - 1;
  } else {
    p.quantum_m = to.mantissa_bits;
    p.quantum_min = to.min_normal_exponent() - to.mantissa_bits;
    p.field_offset = to.mantissa_bits + to.bias - 1;
    p.max_magnitude = static_cast<int32_t>(to.max_finite_magnitude());
  }
  p.sign_mask = to.sign_mask();
  p.code_mask = to.code_mask();
  if (to.specials == SpecialEncoding::kIeee) {
    p.nan_quiet =
        (((1u << to.exponent_bits) - 1) << to.mantissa_bits) | (1u << (to.mantissa_bits - 1));
  }

  // Codes of the special cases, from the reference itself.
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  ConvertOptions canonical = o;
  canonical.nan = NanPolicy::kCanonical;
  ConvertOptions toward_zero = o;
  toward_zero.rounding = Rounding::kTowardZero;
  const Overflow policy = EffectiveOverflow(to, o.overflow);
  for (int s = 0; s < 2; ++s) {
    const float sign = s == 0 ? 1.0f : -1.0f;
    p.zero[s] = EncodeFloat32(to, sign * 0.0f, o);
    p.inf[s] = EncodeFloat32(to, sign * inf, o, 0, &p.inf_events[s]);
    p.nan[s] = EncodeFloat32(to, std::copysign(nan, sign), canonical, 0, &p.nan_events);
    p.largest[s] = EncodeFloat32(to, sign * std::numeric_limits<float>::max(), toward_zero);
    const bool negative = s == 1;
    p.toward_zero[s] = o.rounding == Rounding::kTowardZero || o.rounding == Rounding::kOdd ||
                       (o.rounding == Rounding::kTowardPositive && negative) ||
                       (o.rounding == Rounding::kTowardNegative && !negative);
    p.overflow_events[s] = kInexact | kOverflow;
    if (policy == Overflow::kInfinity) {
      p.overflow[s] = EncodeFloat32(to, sign * inf, o);
    } else if (policy == Overflow::kNan) {
      p.overflow[s] = p.nan[s];
    } else {
      p.overflow[s] = p.largest[s];
      p.overflow_events[s] |= kSaturated;
    }
  }

  // Nearest-even of a normal input to a normal, finite result: no per-lane
  // shift (the common case of real tensors).
  if (o.rounding == Rounding::kNearestEven && to.is_float() && to.mantissa_bits < 23) {
    p.fast = true;
    p.fast_shift = 23 - to.mantissa_bits;
    p.fast_add = ((1u << (p.fast_shift - 1)) - 1) - (static_cast<uint32_t>(127 - to.bias) << 23);
    p.fast_tie_always = to.mantissa_bits == 0;
    uint32_t lo = std::max(Bits(static_cast<float>(to.min_normal())), 0x00800000u);
    if (p.daz && source == Source::kFloat16) lo = std::max(lo, Bits(0x1p-14f));
    p.fast_lo = static_cast<int32_t>(lo);
    p.fast_hi = static_cast<int32_t>(Bits(static_cast<float>(to.max_finite())) +
                                     (1u << (p.fast_shift - 1)));
  }
  const bool grid = to.is_float() && to.has_zero && to.has_negative_zero() && !p.daz && !p.ftz &&
                    source == Source::kFloat32 && to.mantissa_bits < 23 &&
                    to.min_normal_exponent() >= -126;
  p.grid_fast = grid && o.rounding == Rounding::kNearestEven &&
                to.max_normal_exponent() + 2 + 127 + 23 - to.mantissa_bits <= 254;
  p.grid_toward_zero = grid && o.rounding == Rounding::kTowardZero;
  p.grid_stochastic = grid && o.rounding == Rounding::kStochastic &&
                      to.min_normal_exponent() + 127 - to.mantissa_bits >= 1 &&
                      to.max_normal_exponent() + 2 + 127 + to.mantissa_bits <= 254;
  if (grid) {
    p.grid_min_field = to.min_normal_exponent() + 127;
    p.grid_max = static_cast<float>(to.max_finite());
    p.grid_min_normal = static_cast<float>(to.min_normal());
    p.grid_subnormal_scale = std::ldexp(1.0f, to.mantissa_bits - to.min_normal_exponent());
    p.grid_rebias = static_cast<uint32_t>(127 - to.bias) << to.mantissa_bits;
  }
  p.f16c = IsFloat16(to) && source == Source::kFloat32 && o.rounding == Rounding::kNearestEven &&
           policy == Overflow::kInfinity &&
           (o.subnormals == Subnormals::kKeep || o.subnormals == Subnormals::kInputsAreZero);
  if (o.rounding == Rounding::kNearestEven && !to.is_float()) {
    p.int_fast_hi = static_cast<int32_t>(Bits(static_cast<float>(p.int_highest) + 0.5f));
  }
  p.bf16 = IsBFloat16(to) && source == Source::kFloat32 && o.rounding == Rounding::kNearestEven &&
           policy == Overflow::kInfinity && o.subnormals == Subnormals::kKeep;
  p.k0 = Fmix32(static_cast<uint32_t>(o.seed) ^ 0x9E3779B9u);
  p.k1 = Fmix32(static_cast<uint32_t>(o.seed >> 32) + p.k0);
  return p;
}

}  // namespace kernels

std::string KernelTarget() { return kernels::DispatchTargetName(); }

void ConversionError::Merge(const ConversionError& o) {
  error.Merge(o.error);
  inexact += o.inexact;
  overflow += o.overflow;
  saturated += o.saturated;
  flushed += o.flushed;
  underflow += o.underflow;
  nan_replaced += o.nan_replaced;
}

absl::Status EncodeArray(const Format& to, std::span<const float> in, std::span<uint8_t> out,
                         const ConvertOptions& options, const RunOptions& run) {
  return RunEncode(to, in.data(), in.size(), 4, out, options, run, Source::kFloat32);
}

absl::Status EncodeArray16(const Format& from, std::span<const uint16_t> in, const Format& to,
                           std::span<uint8_t> out, const ConvertOptions& options,
                           const RunOptions& run) {
  Source source;
  if (IsFloat16(from)) {
    source = Source::kFloat16;
  } else if (IsBFloat16(from)) {
    source = Source::kBFloat16;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("16-bit input must be fp16 or bf16, not ", from.name));
  }
  return RunEncode(to, in.data(), in.size(), 2, out, options, run, source);
}

absl::Status DecodeArray(const Format& from, std::span<const uint8_t> in, std::span<float> out,
                         const RunOptions& run) {
  const size_t count = out.size();
  const size_t need = StorageBytes(from, count);
  if (in.size() != need) {
    return absl::InvalidArgumentError(absl::StrCat("input holds ", in.size(), " bytes; ", count,
                                                   " codes of ", from.name, " take ", need));
  }
  if (Overlap(in.data(), in.size(), out.data(), count * sizeof(float))) {
    return absl::InvalidArgumentError("input and output overlap");
  }
  if (const int64_t bad = FirstInvalidCode(from, in, count); bad >= 0) {
    return absl::InvalidArgumentError(absl::StrCat("code at index ", bad, " has bits above the ",
                                                   from.bits, "-bit width of ", from.name));
  }
  Decoder decoder = MakeDecoder(from);
  size_t head = 0;
  if (!decoder.scalar && !decoder.plan.use_table && count * sizeof(float) >= kStreamBytes) {
    head = HeadBeforeAlignment(out.data(), sizeof(float), count);
    kernels::DispatchDecode(decoder.plan, in.data(), head, out.data());
    decoder.plan.stream = true;
  }
  in = in.subspan(StorageOffset(decoder.plan.storage, head));
  out = out.subspan(head);
  const int parts = ThreadCount(run, count - head);
  ForParts(count - head, parts, [&](int, size_t begin, size_t end) {
    if (decoder.scalar) {
      std::vector<uint32_t> codes;
      const size_t offset = StorageOffset(decoder.plan.storage, begin);
      (void)UnpackCodes(from, in.subspan(offset, StorageBytes(from, end - begin)), begin, &codes);
      for (size_t i = begin; i < end; ++i) out[i] = DecodeToFloat32(from, codes[i - begin]);
      return;
    }
    kernels::DispatchDecode(decoder.plan, in.data() + StorageOffset(decoder.plan.storage, begin),
                            end - begin, out.data() + begin);
  });
  return absl::OkStatus();
}

struct Rounder::State {
  Format to;
  EncodePlan plan;
  Decoder decoder;
};

absl::StatusOr<Rounder> Rounder::Make(const Format& to, const ConvertOptions& options) {
  if (absl::Status s = ValidateOptions(to, options); !s.ok()) return s;
  auto state = std::make_shared<State>();
  state->to = to;
  state->plan = MakeEncodePlan(to, options, Source::kFloat32);
  state->decoder = MakeDecoder(to);
  if (!state->decoder.table.empty()) state->decoder.plan.table = state->decoder.table.data();
  return Rounder(std::move(state));
}

void Rounder::Round(std::span<const float> in, std::span<float> out, const RunOptions& run) const {
  const State& st = *state_;
  size_t count = std::min(in.size(), out.size());
  kernels::DecodePlan decode = st.decoder.plan;
  uint64_t first = run.first_index;
  // An output beyond the cache is streamed past it (non-temporal stores from
  // a 64-byte boundary on), unless rounded in place.
  if (!st.decoder.scalar && in.data() != out.data() && count * sizeof(float) >= kStreamBytes) {
    const size_t head = HeadBeforeAlignment(out.data(), sizeof(float), count);
    kernels::DispatchRound(st.plan, decode, in.data(), head, first, out.data());
    in = in.subspan(head);
    out = out.subspan(head);
    count -= head;
    first += head;
    decode.stream = true;
  }
  ForParts(count, ThreadCount(run, count), [&](int, size_t begin, size_t end) {
    if (!st.decoder.scalar) {
      kernels::DispatchRound(st.plan, decode, in.data() + begin, end - begin, first + begin,
                             out.data() + begin);
      return;
    }
    // The odd user-defined format: encode by the kernel, decode by the
    // reference, a block at a time.
    constexpr size_t kBlock = 1024;
    std::vector<uint32_t> codes(kBlock), events(kBlock);
    for (size_t i = begin; i < end; i += kBlock) {
      const size_t n = std::min(kBlock, end - i);
      kernels::DispatchEncodeWithEvents(st.plan, in.data() + i, n, first + i, codes.data(),
                                        events.data());
      for (size_t k = 0; k < n; ++k) out[i + k] = DecodeToFloat32(st.to, codes[k]);
    }
  });
}

absl::Status RoundArray(const Format& to, std::span<const float> in, std::span<float> out,
                        const ConvertOptions& options, const RunOptions& run) {
  if (in.size() != out.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("input holds ", in.size(), " values, output ", out.size()));
  }
  if (in.data() != out.data() &&
      Overlap(in.data(), in.size() * sizeof(float), out.data(), out.size() * sizeof(float))) {
    return absl::InvalidArgumentError("input and output overlap");
  }
  absl::StatusOr<Rounder> rounder = Rounder::Make(to, options);
  if (!rounder.ok()) return rounder.status();
  rounder->Round(in, out, run);
  return absl::OkStatus();
}

absl::StatusOr<ConversionError> MeasureArray(const Format& to, std::span<const float> in,
                                             const ConvertOptions& options, const RunOptions& run) {
  if (absl::Status s = ValidateOptions(to, options); !s.ok()) return s;
  const EncodePlan plan = MakeEncodePlan(to, options, Source::kFloat32);
  const Decoder decoder = MakeDecoder(to);
  const int parts = ThreadCount(run, in.size());
  std::vector<ConversionError> partial(parts);
  ForParts(in.size(), parts, [&](int part, size_t begin, size_t end) {
    if (decoder.scalar) {  // decode through the reference, a block at a time
      constexpr size_t kBlock = 4096;
      std::vector<uint32_t> codes(kBlock), events(kBlock);
      for (size_t i = begin; i < end; i += kBlock) {
        const size_t n = std::min(kBlock, end - i);
        // Encode with events, then compute the same sums as the kernel.
        kernels::DispatchEncodeWithEvents(plan, in.data() + i, n, run.first_index + i, codes.data(),
                                          events.data());
        std::vector<float> values(n);
        for (size_t k = 0; k < n; ++k) values[k] = DecodeToFloat32(to, codes[k]);
        kernels::Accumulate(in.data() + i, values.data(), events.data(), n, &partial[part]);
        partial[part].error.count += n;
      }
      return;
    }
    kernels::DispatchMeasure(plan, decoder.plan, in.data() + begin, end - begin,
                             run.first_index + begin, &partial[part]);
  });
  ConversionError total;
  for (const ConversionError& e : partial) total.Merge(e);
  return total;
}

}  // namespace lowp
