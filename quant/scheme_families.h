// Internal: the factories ParseScheme asks in turn, one per family of
// schemes, and the helpers they share. Not installed.
#ifndef LOWP_QUANT_SCHEME_FAMILIES_H_
#define LOWP_QUANT_SCHEME_FAMILIES_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "formats/format.h"
#include "formats/packing.h"
#include "kernels/convert.h"
#include "codecs/ggml.h"
#include "quant/scheme.h"

namespace lowp::internal {

// The ":KEY=VALUE" options of a scheme name, in order ("double-quant" alone
// has an empty value). A factory must reject keys it does not know.
using SchemeOptions = std::vector<std::pair<std::string, std::string>>;

// Each factory returns NotFound when `base` (the name before the first ':')
// is not one of its family's, InvalidArgument for a bad option, else the
// scheme, whose name() is the canonical spelling with options.
using SchemeFactory = absl::StatusOr<std::unique_ptr<Scheme>> (*)(absl::string_view base,
                                                                  const SchemeOptions& options);

absl::StatusOr<std::unique_ptr<Scheme>> MakeCastScheme(absl::string_view base,
                                                       const SchemeOptions& options);
absl::StatusOr<std::unique_ptr<Scheme>> MakeIntScheme(absl::string_view base,
                                                      const SchemeOptions& options);
absl::StatusOr<std::unique_ptr<Scheme>> MakeScaledFloatScheme(absl::string_view base,
                                                              const SchemeOptions& options);
absl::StatusOr<std::unique_ptr<Scheme>> MakeMxScheme(absl::string_view base,
                                                     const SchemeOptions& options);
absl::StatusOr<std::unique_ptr<Scheme>> MakeNvfp4Scheme(absl::string_view base,
                                                        const SchemeOptions& options);
absl::StatusOr<std::unique_ptr<Scheme>> MakeNf4Scheme(absl::string_view base,
                                                      const SchemeOptions& options);
absl::StatusOr<std::unique_ptr<Scheme>> MakeGgmlScheme(absl::string_view base,
                                                       const SchemeOptions& options);
absl::StatusOr<std::unique_ptr<Scheme>> MakeRecipe(absl::string_view base,
                                                   const SchemeOptions& options);
absl::StatusOr<std::unique_ptr<Scheme>> MakeGgmlCodecScheme(absl::string_view base,
                                                            const SchemeOptions& options);

// Families for `lowp schemes`, one list per file.
std::vector<SchemeFamily> CastFamilies();
std::vector<SchemeFamily> IntFamilies();
std::vector<SchemeFamily> ScaledFloatFamilies();
std::vector<SchemeFamily> MxFamilies();
std::vector<SchemeFamily> Nvfp4Families();
std::vector<SchemeFamily> Nf4Families();
std::vector<SchemeFamily> GgmlFamilies();
std::vector<SchemeFamily> GgmlCodecFamilies();
std::vector<SchemeFamily> RecipeFamilies();
std::vector<SchemeFamily> RotationFamilies();

// `inner` with ":rotate=VALUE" (quant/rotated_scheme.cc): VALUE is hadamard
// or hadamardN. InvalidArgument for another value, a recipe, or a scheme
// that needs an importance matrix.
absl::StatusOr<std::unique_ptr<Scheme>> Rotate(std::unique_ptr<Scheme> inner,
                                               absl::string_view value);

// "fp16" | "bf16" | "fp32" scale storage: the format, for ":scale=".
absl::StatusOr<Format> ScaleFormat(absl::string_view name);
// Rounds a positive scale to `format` (nearest-even unless `rounding` says
// otherwise; saturating), as stored.
float StoreScale(const Format& format, float scale, Rounding rounding = Rounding::kNearestEven);

// Rounds each value of `in` to `format` (nearest-even, saturating: the
// element conversion of the block formats) and decodes it into `out`, on the
// calling thread (callers parallelize across chunks); `codes` receives the
// codes in the storage layout of formats/packing.h. Sizes must match.
void RoundTripSaturating(const Format& format, std::span<const float> in, std::span<float> out,
                         std::vector<uint8_t>& codes);

// RoundTripSaturating's values without the codes, in one pass (RoundArray),
// its plan made once: for schemes that keep one per element format.
Rounder SaturatingRounder(const Format& format);

// Rows of `in` (`cols` each) through ggml type `type` whose block divides
// cols or is at most 64 (a short last block padded with zeros): each finite
// element encoded by codecs/ggml.h with the row's importance from `context`
// and decoded into `out`; NaN and +-Inf encoded as 0 and passed through.
// The stored form is ggml's bytes.
void ApplyGgmlRows(ggml::Type type, std::span<const float> in, int64_t cols,
                   const TensorContext& context, std::span<float> out, SchemeCounts& counts,
                   StoredChunk* stored);

// ApplyGgmlRows's values and counts for q5_1 without importance, MXFP4 and
// NVFP4 (whose encoders ignore it), through the block kernels and without
// the bytes (quant/ggml_block_schemes.cc); false, with nothing written, for
// any other type.
bool ApplyGgmlBlocks(ggml::Type type, std::span<const float> in, int64_t cols,
                     std::span<float> out, SchemeCounts& counts);

// The InvalidArgument for an option key the scheme does not take.
absl::Status UnknownOption(absl::string_view base, absl::string_view key, absl::string_view valid);

}  // namespace lowp::internal

#endif  // LOWP_QUANT_SCHEME_FAMILIES_H_
