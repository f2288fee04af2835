// ":rotate=hadamard[N]" on any scheme: QuaRot-style rotation of a row before
// it is quantized (arXiv 2404.00456; MR-GPTQ's block-wise rotation for MXFP4,
// arXiv 2509.23202).
//
// A linear layer y = x W^T is unchanged when both the weight's rows and the
// activation's rows are multiplied by an orthonormal H: (x H)(W H)^T = x W^T.
// A rotated deployment stores Q(W H) and multiplies it by Q_a(x H). The
// scheme gives back Q(r H) H for a row r (H = H^T = H^-1, kernels/hadamard.h):
// the quantized row in the original basis, so that products of the emulated
// weights and activations equal the deployment's in exact arithmetic
// (Q_a(x H) H (Q(W H) H)^T = Q_a(x H) Q(W H)^T), whichever of the two is
// rotated, and every metric compares values in the basis the model has.
// Stored codes and scales (StoredChunk) are those of the rotated row, as a
// rotated deployment stores them.
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "kernels/hadamard.h"
#include "quant/recipe.h"
#include "quant/scheme_families.h"

namespace lowp::internal {
namespace {

constexpr int64_t kMaxBlock = int64_t{1} << 16;

class RotatedScheme final : public Scheme {
 public:
  // `block` 0: the whole row.
  RotatedScheme(std::unique_ptr<Scheme> inner, int64_t block)
      : Scheme(absl::StrCat(inner->name(), ":rotate=", Spelling(block))),
        inner_(std::move(inner)),
        block_(block) {}

  // The block a row of `cols` is rotated in: the one asked for (the whole
  // row when none was) when it is a power of two dividing the row, else the
  // largest power of two dividing both; 1 (no rotation) for an odd row.
  int64_t BlockFor(int64_t cols) const {
    const int64_t most = LargestPowerOfTwoDividing(std::max<int64_t>(cols, 1));
    return block_ == 0 ? std::min(most, kMaxBlock) : std::min(block_, most);
  }

  std::string AppliedName(int64_t cols) const override {
    const int64_t block = BlockFor(cols);
    const std::string inner = inner_->AppliedName(cols);
    if (block == 1) return inner;
    if (inner == inner_->name() && block == (block_ == 0 ? cols : block_)) return name();
    return absl::StrCat(inner, ":rotate=", Spelling(block));
  }

  uint64_t StorageBits(int64_t rows, int64_t cols) const override {
    return inner_->StorageBits(rows, cols);
  }
  int64_t ChunkRows(int64_t cols) const override { return inner_->ChunkRows(cols); }
  bool NeedsTensorPass() const override { return inner_->NeedsTensorPass(); }

  void Observe(std::span<const float> in, int64_t cols, TensorContext& context) const override {
    std::vector<float> rotated(in.begin(), in.end());
    HadamardBlocks(rotated, BlockFor(cols));
    inner_->Observe(rotated, cols, context);
  }

  void Apply(std::span<const float> in, int64_t cols, const TensorContext& context,
             std::span<float> out, SchemeCounts& counts,
             StoredChunk* stored = nullptr) const override {
    const int64_t block = BlockFor(cols);
    std::vector<float> rotated(in.begin(), in.end());
    HadamardBlocks(rotated, block);
    // An importance matrix weighs the original columns: the rotated basis
    // mixes them, so the inner scheme quantizes without one.
    TensorContext plain = context;
    plain.importance = nullptr;
    inner_->Apply(rotated, cols, plain, out, counts, stored);
    HadamardBlocks(out, block);
  }

 private:
  static std::string Spelling(int64_t block) {
    return block == 0 ? "hadamard" : absl::StrCat("hadamard", block);
  }

  std::unique_ptr<Scheme> inner_;
  int64_t block_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Scheme>> Rotate(std::unique_ptr<Scheme> inner,
                                               absl::string_view value) {
  const std::string name = inner->name();
  int64_t block = 0;
  absl::string_view size = value;
  if (!absl::ConsumePrefix(&size, "hadamard") ||
      (!size.empty() && (!absl::SimpleAtoi(size, &block) || block < 2 || block > kMaxBlock ||
                         !IsPowerOfTwo(block)))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scheme '", name, "': rotate=", value,
        " is not hadamard (the whole row) or hadamardN (blocks of N, a power of two from 2 to ",
        kMaxBlock, ")"));
  }
  if (AsRecipe(*inner) != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "recipe '", name, "' takes no rotate option: rotate one of the schemes it chooses"));
  }
  // The i-quants that cannot quantize without importance: it does not carry
  // into the rotated basis (see Apply).
  if (inner->NeedsImportance(256)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "scheme '", name, "' needs an importance matrix, which cannot be rotated with the rows"));
  }
  return std::make_unique<RotatedScheme>(std::move(inner), block);
}

std::vector<SchemeFamily> RotationFamilies() {
  SchemeFamily f;
  f.family = "rotation (an option of any scheme)";
  f.examples = {"int4-g128:rotate=hadamard", "mxfp4:rotate=hadamard32",
                "fp8_e4m3fn-channel:rotate=hadamard128"};
  f.rule =
      "QuaRot-style: each row r (the input dimension of a weight, one token's activations) is "
      "multiplied by the normalized Walsh-Hadamard matrix H (Sylvester order, entries "
      "+-1/sqrt(n), no random signs) in blocks of N along the row, quantized by the scheme, and "
      "rotated back: the value is Q(r H) H, so a rotated weight times a rotated activation "
      "equals the deployment's Q_a(x H) Q(W H)^T in exact arithmetic. hadamard: the whole "
      "row when its length is a power of two, else the largest power of two dividing it; "
      "hadamardN: blocks of N, or of the largest power of two dividing both N and the row "
      "(the report names the block used); odd rows are not rotated. A non-finite value spreads "
      "to its whole block, as in a rotated model. Storage is the scheme's (the transform has "
      "no parameters); stored codes are the rotated row's; an importance matrix is not used";
  f.options = "rotate=hadamard | rotate=hadamardN, after the scheme's own options";
  return {f};
}

}  // namespace lowp::internal
