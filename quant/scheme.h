// Quantization schemes: how a deployed format stores a tensor (element codes,
// block scales, zero points) and what it gives back when dequantized.
//
// A scheme sees a tensor as a matrix [rows, cols] (TensorView::rows/cols):
// channels are rows, groups and blocks run along a row (the input axis of a
// [out, in] weight), and a row's last block is short when cols is not a
// multiple of the block size (it is quantized as if padded with zeros, and
// its scale is stored like any other).
//
// Non-finite inputs: NaN and +-Inf take no part in any scale and come back
// unchanged, except that a cast gives what its format makes of them (metrics
// report and exclude them either way).
#ifndef LOWP_QUANT_SCHEME_H_
#define LOWP_QUANT_SCHEME_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "codecs/ggml.h"

namespace lowp {

class BlockRounder;  // quant/rounder.h

// What a scheme did to the elements it quantized, beyond their values.
struct SchemeCounts {
  // Finite inputs the scheme clamped: beyond the largest code of their block
  // (a scale rounded down, a clip ratio below 1, MX's floor scale) or beyond
  // the range of a cast's format.
  uint64_t clipped = 0;
  // Nonzero elements stored as a subnormal code of a floating element format.
  uint64_t subnormal = 0;

  void Add(const SchemeCounts& other) {
    clipped += other.clipped;
    subnormal += other.subnormal;
  }
};

// The stored form of a chunk of rows, for tests and inspection.
struct StoredChunk {
  // One per element, in order: the element format's code bits for floating
  // elements (an e2m1 code 0..15), the integer for integer elements (-8..7
  // for int4, 0..15 for uint4, the NF4 index 0..15, ggml's unsigned q).
  std::vector<int32_t> codes;
  // One per block, row by row, as stored (already rounded to the scale's
  // format) and decoded to float: the multiplier of the element values
  // (ggml's d, MX's 2^e, NVFP4's e4m3 block scale, NF4's absmax).
  std::vector<float> scales;
  // One per block for schemes that store one, else empty: the integer zero
  // point of asymmetric schemes, ggml q4_1's m (the block minimum, fp16).
  std::vector<float> offsets;
  // The storage bytes, for schemes stored in a real layout (the llama.cpp
  // types of codecs/ggml.h: ggml's blocks, row after row); else empty.
  std::vector<uint8_t> bytes;
  // NVFP4's per-tensor decode scale (the multiplier of every block scale);
  // 0 for other schemes.
  float tensor_scale = 0;
  // GPTQ's act-order: blocks are consecutive columns of this order (the
  // first block_cols columns it lists are block 0...) and `scales` follow
  // it; empty when blocks are consecutive columns.
  std::vector<int32_t> column_order;
};

// How a scheme's codes and scales make its values, for writers of layouts
// other than ggml's (compressed-tensors, GPTQ checkpoints): kNone for a
// scheme they cannot hold (ggml's own types, MX, NF4, rotations, casts).
struct CodeLayout {
  enum class Kind : uint8_t { kNone, kInt, kScaledFloat, kNvfp4 };
  Kind kind = Kind::kNone;
  // kInt: codes -(2^(b-1) - 1)..2^(b-1) - 1 times the scale, or (asymmetric)
  // 0..2^b - 1 minus an integer zero point, times the scale.
  int bits = 0;
  bool asymmetric = false;
  bool per_tensor = false;   // one scale for the tensor
  int64_t block_rows = 1;    // rows that share a scale (2-D blocks)
  int64_t block_cols = 0;    // columns that share a scale; 0: the whole row
  std::string element;       // kScaledFloat's catalog format ("fp8_e4m3fn")
  // The scales' catalog format: "fp16", "bf16", "fp32", "e8m0fnu" (:scale=ue8m0),
  // "fp8_e4m3fn" (NVFP4's block scales).
  std::string scale;
};

// A tensor-wide quantity some schemes need before quantizing any chunk (a
// per-tensor scale, NF4's double-quantization mean), gathered by Observe over
// every chunk of the tensor in order and merged across chunks.
struct TensorContext {
  float absmax = 0;             // max |x| over the finite elements
  float min = 0;                // min(0, every finite element)
  float max = 0;                // max(0, every finite element)
  double block_absmax_sum = 0;  // sum of the per-block absmax (NF4 double quant)
  uint64_t block_count = 0;
  // Index in the tensor of the chunk's first element: the caller sets it for
  // each Apply (stochastic rounding draws by element index).
  int64_t first_element = 0;
  // An importance matrix's weights for this tensor (llama.cpp's imatrix: the
  // mean square of each input column over calibration text), set by the
  // caller, not gathered: `matrices` consecutive vectors of `cols` weights,
  // one per matrix of `rows_per_matrix` rows (the experts of a merged
  // [experts, rows, cols] tensor; one for a plain matrix). Empty: none. The
  // llama.cpp types quantize with them as ggml_quantize_chunk does with its
  // `imatrix` argument; the other schemes ignore them.
  std::shared_ptr<const std::vector<float>> importance;
  int64_t rows_per_matrix = 0;

  // The weights of row `row` of the tensor (cols of them), empty if none.
  std::span<const float> ImportanceOfRow(int64_t row, int64_t cols) const;

  void Merge(const TensorContext& other);
};

class Scheme {
 public:
  virtual ~Scheme() = default;

  // Canonical name with its options ("int4-g128:scale=bf16").
  const std::string& name() const { return name_; }
  // What rows of `cols` elements are actually stored as: name(), except for
  // llama.cpp's super-block types on rows 256 does not divide, which take
  // llama.cpp's fallback ("q5_0" for q4_K, "f16").
  virtual std::string AppliedName(int64_t cols) const {
    (void)cols;
    return name_;
  }

  // Storage of `rows` x `cols` elements in bits: codes, scales, zero points
  // and tensor-wide scales, as the deployed format lays them out.
  virtual uint64_t StorageBits(int64_t rows, int64_t cols) const = 0;
  double BitsPerWeight(int64_t rows, int64_t cols) const;

  // Apply's chunks hold a multiple of this many rows (except a tensor's last
  // chunk), so that a group spanning rows (NF4's double quantization groups
  // 256 block scales) is never split.
  virtual int64_t ChunkRows(int64_t cols) const {
    (void)cols;
    return 1;
  }

  // True when Apply needs a TensorContext gathered by Observe over the whole
  // tensor first (a second read of the tensor).
  virtual bool NeedsTensorPass() const { return false; }
  // True when rows of `cols` elements cannot be quantized without importance
  // weights (TensorContext::importance): ggml's iq2_xxs, iq2_xs and iq1_s
  // quantizers require them. Callers refuse such a scheme without one.
  virtual bool NeedsImportance(int64_t cols) const {
    (void)cols;
    return false;
  }
  // True when importance weights change how rows of `cols` elements are
  // quantized (llama.cpp's types whose quantizer takes ggml_quantize_chunk's
  // imatrix); an importance matrix given for schemes none of which use it
  // is refused by the callers as an option that changes nothing.
  virtual bool UsesImportance(int64_t cols) const {
    (void)cols;
    return false;
  }
  // The llama.cpp type rows of `cols` elements are stored as, whose bytes
  // (ggml's blocks, row after row) Apply records in StoredChunk::bytes; null
  // for a scheme with no llama.cpp layout (lowp's own, OCP MX, NVFP4 with its
  // tensor scale, rotations, casts to formats ggml lacks). A GGUF file holds
  // only schemes that have one.
  virtual const ggml::TypeInfo* GgmlLayout(int64_t cols) const {
    (void)cols;
    return nullptr;
  }
  // The code layout a writer of other checkpoints maps (CodeLayout).
  virtual CodeLayout Codes() const { return {}; }
  // GPTQ's hold on the scheme for [rows, cols] matrices (quant/rounder.h),
  // `context` gathered over the whole tensor when NeedsTensorPass.
  // InvalidArgument naming the scheme when its codes are not chosen one
  // element at a time once a block's scales are (casts, lookup grids,
  // rotations) or the shape does not fit.
  virtual absl::StatusOr<std::unique_ptr<BlockRounder>> BlockRounderFor(
      int64_t rows, int64_t cols, const TensorContext& context) const;

  // Adds what whole rows `in` contribute to the tensor's context.
  virtual void Observe(std::span<const float> in, int64_t cols, TensorContext& context) const;

  // Quantizes whole rows (`in.size()` is a multiple of `cols`) and writes the
  // dequantized values to `out` (same size, not overlapping `in`). Records the
  // stored form in `stored` when it is not null.
  virtual void Apply(std::span<const float> in, int64_t cols, const TensorContext& context,
                     std::span<float> out, SchemeCounts& counts,
                     StoredChunk* stored = nullptr) const = 0;
  // What Apply stores for `in` ([rows, cols]): its codes, scales and
  // offsets (a BlockRounder's Choose takes a block's parameters from it).
  StoredChunk Stored(std::span<const float> in, int64_t cols, const TensorContext& context) const;

 protected:
  explicit Scheme(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

// Parses a scheme name with options, "NAME[:KEY=VALUE...]":
//   casts       any floating catalog format (fp16, bf16, fp8_e4m3fn, ...)
//               :rounding=MODE (nearest-even default; stochastic uses :seed=N)
//   integer     int8, int8-channel, intN-gG (N 2..8), uintN-gG-asym, uint8-asym,
//               uint8-channel-asym; :scale=fp16|bf16|fp32, :clip=mse
//   fp8 scaled  FORMAT-tensor, FORMAT-channel, FORMAT-gG (groups along a
//               row), FORMAT-bRxC (2-D blocks; chunks of R rows): a scale
//               mapping the block's absmax to the format's max;
//               :scale=fp32|fp16|bf16|ue8m0
//   MX          mxfp8 (= mxfp8_e4m3), mxfp8_e5m2, mxfp6_e2m3, mxfp6_e3m2,
//               mxfp4, mxint8; :scale=floor (OCP) | round-up
//   NVFP4       nvfp4
//   NF4         nf4, nf4:double-quant
//   llama.cpp   q8_0, q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K,
//               iq4_nl, iq4_xs, ggml-mxfp4, ggml-nvfp4 (case of the letters
//               ignored)
//   any scheme  :rotate=hadamard | :rotate=hadamardN, a Hadamard rotation of
//               each row before quantizing, undone after (quant/rotated_scheme.cc)
// InvalidArgument naming the part that is wrong.
absl::StatusOr<std::unique_ptr<Scheme>> ParseScheme(absl::string_view name);

// One entry per family for `lowp schemes`: example names, the exact rule and
// bits per weight of a 4096-wide row.
struct SchemeFamily {
  std::string family;
  std::vector<std::string> examples;
  std::string rule;
  std::string options;
};
const std::vector<SchemeFamily>& SchemeFamilies();

}  // namespace lowp

#endif  // LOWP_QUANT_SCHEME_H_
