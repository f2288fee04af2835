// llama.cpp's importance-matrix files ("imatrix"), both formats, as
// llama-imatrix writes them and llama-quantize uses them. The rules below
// are read from llama.cpp's source (tools/imatrix/imatrix.cpp,
// tools/quantize/quantize.cpp, src/llama-quant.cpp, ggml/src/gguf.cpp):
//
// What is collected (imatrix.cpp, IMatrixCollector::collect_imatrix): for
// each weight W used in a matrix multiplication, per input column j the sum
// over the tokens x that reached it of x_j^2 ("in_sum2"; "in_sum" is the sum
// of x_j), and how many tokens that was ("counts"). A 3-D expert tensor used
// through MUL_MAT_ID has one count per expert; anything else one count for
// the whole tensor (a dense 3-D tensor's matrices share one count, so its
// in_sum2 is one row of columns x matrices values). The column axis is the
// weight's input dimension, ggml's ne[0]: Hugging Face's in_features, in
// either naming; llama.cpp's q/k row permutation does not touch columns.
//
// GGUF format (imatrix.cpp, save_imatrix; written by gguf_write_to_file):
//   metadata, in this order: general.type = "imatrix" (string),
//     imatrix.datasets (array of string), imatrix.chunk_count (u32: chunks
//     processed), imatrix.chunk_size (u32: tokens per chunk, n_ctx /
//     n_parallel);
//   for each entry, by name in byte order (std::sort), F32 tensors
//     <name>.in_sum2  ne = [n, n_mat]   the sums of squares, matrix-major
//     <name>.counts   ne = [1, n_mat]   tokens per matrix, as float
//     <name>.in_sum   ne = [n, n_mat]   (when collected) the sums
//   with ggml_n_dims's trimming: for n_mat = 1 they are written 1-D, [n] and
//   [1]. Every entry is written, partial ones (some count 0) included.
// Legacy ".dat" format (imatrix.cpp, save_imatrix_legacy), little-endian:
//   i32 n_entries, then per entry (by name in byte order):
//     i32 name length, the name's bytes, i32 ncall, i32 nval,
//     nval f32: (in_sum2[i] / count) * ncall, where count is the matrix's
//       count, and 1 / 1 for a matrix with count 0;
//       ncall = ceil(max count / chunk_size), computed in integers;
//   then i32 the chunk count and i32 length + bytes of one dataset name (the
//   prompt file, else the last dataset loaded; length 0 when none).
//   Entries whose counts are all 0 are not written. There is no per-expert
//   count, no in_sum, no chunk size.
//
// How llama-quantize turns a file into what it passes to ggml_quantize_chunk
// (quantize.cpp load_imatrix / load_legacy_imatrix, llama-quant.cpp):
//   GGUF: for matrix j (in_sum2's ne[1] rows of ne[0]) with float count c =
//     counts[j]: value[j*ne0 + i] = in_sum2[j*ne0 + i] / c in float when
//     c > 0, else 1 ("partial imatrix data"). The mean of x^2 per column:
//     not a naive sum2 / count where count is 0. The file must have
//     imatrix.datasets, imatrix.chunk_count and imatrix.chunk_size ("missing
//     imatrix metadata") and at least one tensor; an in_sum2 without counts
//     or counts without in_sum2 is "mismatched sums and counts"; in_sum and
//     other tensors are ignored. general.type is not checked there, nor the
//     tensors' type, nor that counts has ne[1] elements (it is read past).
//     Newer llama.cpp (common/imatrix-loader.cpp, common_imatrix_load)
//     checks F32 and rounds each count to an integer (std::lround) before
//     dividing: for the whole-number counts llama-imatrix writes, and lowp
//     requires, both give the same values.
//   Legacy: value[i] = stored[i] / float(ncall) when ncall > 0, else the
//     stored values as they are. Any file gguf_init_from_file cannot read
//     (not GGUF, or a damaged GGUF) is read as legacy. After the entries, if
//     the file has more bytes: i32 chunk count, i32 length, dataset name.
//   Then --exclude-weights S... drops every entry whose name contains any S
//   (substring match), --include-weights S... keeps only those containing
//   one; the two together are a usage error. Every value left must be
//   finite ("imatrix contains non-finite value"). A tensor being quantized
//   is looked up by its llama.cpp name: absent, it is quantized without an
//   imatrix ("did not find weights"), which is an error only for the very
//   low-bit types (IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M but for
//   token_embd/output, Q2_K under Q2_K_S but for token_embd); present, its
//   value count must equal ne[0] * ne[2] (columns x experts) or it is an
//   error (token_embd.weight: quantized without). Matrix e (ne[2] index) of
//   the tensor gets value + e * ne[0]: ne[0] floats, one per column, used
//   for every row of that matrix.
//
// What lowp does on reading (ReadImatrix / ParseImatrix):
//   - A file beginning "GGUF" is GGUF, anything else legacy (a damaged GGUF
//     is reported as GGUF, not retried as legacy).
//   - GGUF: ParseGguf's checks; general.type must be the string "imatrix";
//     the three imatrix.* keys must be there with their types (u32, u32,
//     array of string) and chunk_size > 0; at least one entry. Per entry:
//     in_sum2 and counts both present (in_sum optional, never alone), all
//     F32; in_sum2 of at most 2 dimensions (after ggml's trimming), [n,
//     n_mat] with n, n_mat >= 1; counts of n_mat elements; in_sum as many as
//     in_sum2. Other tensors are ignored, as llama.cpp does; bytes after the
//     data section are ignored, as ParseGguf does.
//   - Legacy: n_entries >= 1; names 1..63 bytes (ggml tensor names are at
//     most 63), no NUL byte, each once; ncall >= 0; nval >= 1; every count
//     and length checked against the bytes left before anything is
//     allocated. The tail is either absent or exactly i32 chunk count >= 0,
//     i32 length >= 0 and that many bytes: anything else, and any byte after
//     it, is an error (llama.cpp ignores trailing bytes; lowp refuses them).
//     An entry becomes columns = nval, matrices = 1 (the format does not say
//     how nval splits into experts: the weight's shape does, see
//     Importance), sum2 = stored * 512 and counts = {max(ncall, 1) * 512},
//     chunk_size = 512 (llama-imatrix's default context; the format does not
//     store it) as llama-imatrix's load_imatrix_legacy rebuilds its state. As
//     512 is a power of two, sum2 / count is exactly stored / ncall (stored
//     when ncall is 0): Importance gives what llama-quantize computes from
//     the .dat, bit for bit. A stored value whose product with 512 is not
//     finite is refused.
//   - Every entry (read or added): sum2 columns x matrices values, finite and
//     >= 0; counts matrices values, finite, >= 0 and whole numbers (llama.cpp
//     writes integer counts); sum empty or as many as sum2, finite. Dataset
//     names hold no NUL byte (llama.cpp passes them as C strings).
//   Every error is InvalidArgument naming the file and the entry (or
//   DataLoss when the file changes while read; the regular-file errors of
//   io/mapped_file.h for a FIFO, device or directory).
//
// Writing (WriteImatrixGguf / WriteImatrixDat) goes through OutputFile: the
// file is whole or not there. The GGUF is byte for byte what save_imatrix
// writes for the same state. The .dat is what save_imatrix_legacy writes,
// with the chunk size of the Imatrix and its last dataset. Precision the
// .dat loses, against the GGUF:
//   - each value is stored as float((sum2 / count) * ncall), so reading it
//     back gives float(float(sum2 / count) * ncall) / ncall: within one ulp of
//     sum2 / count, and exactly it when ncall is a power of two (1 included);
//   - per-expert counts (only the normalised values survive), the counts'
//     magnitude (tokens; llama-imatrix merging files weighs a .dat by
//     ncall * its context), in_sum, the chunk size, all datasets but the
//     last, and entries whose counts are all 0 (absent from the .dat,
//     llama-quantize then quantizes that tensor without an imatrix; from the
//     GGUF it gets all ones).
#ifndef LOWP_IO_IMATRIX_H_
#define LOWP_IO_IMATRIX_H_

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lowp {

struct ImatrixEntry {
  std::string name;          // llama.cpp's weight name, "blk.3.attn_q.weight"
  int64_t columns = 0;       // values per count: in_sum2's ne[0]
  int64_t matrices = 0;      // counts (experts): in_sum2's ne[1]; 1 for a dense weight
  std::vector<float> sum2;   // sum of x^2, matrix-major: sum2[m * columns + c]
  std::vector<float> sum;    // sum of x, same layout; may be empty
  std::vector<float> counts; // tokens per matrix

  // llama-quantize's values for the whole entry (columns x matrices): per
  // matrix m, sum2 / counts[m] in float, or 1 where counts[m] is 0.
  std::vector<float> Values() const;
};

// The checks every entry passes (see the header comment); InvalidArgument
// beginning with `where` (a file name, or a description) and the entry.
absl::Status ValidateImatrixEntry(const ImatrixEntry& entry, absl::string_view where);

enum class ImatrixFormat { kGguf, kLegacyDat };

class Imatrix {
 public:
  std::vector<std::string> datasets;  // imatrix.datasets; a .dat's one name
  uint32_t chunk_count = 0;           // imatrix.chunk_count; a .dat's last chunk
  uint32_t chunk_size = 0;            // imatrix.chunk_size; 512 for a .dat
  ImatrixFormat format = ImatrixFormat::kGguf;  // what it was read from

  // Adds an entry after ValidateImatrixEntry; a name already present is an
  // error naming it.
  absl::Status Add(ImatrixEntry entry);

  // By name, in byte order (llama.cpp's order of entries in both formats).
  const std::map<std::string, ImatrixEntry, std::less<>>& entries() const { return entries_; }

  // The entry named exactly `name`, or null.
  const ImatrixEntry* FindExact(absl::string_view name) const;
  // The entry of a weight named either way: `tensor_name` as it is, else its
  // llama.cpp name (LlamaCppName: "model.layers.3.self_attn.q_proj.weight" ->
  // "blk.3.attn_q.weight"), else its Hugging Face name (HuggingFaceName, for
  // a file keyed by those), else the fused tensor that takes the same input
  // (q, k, v: "blk.N.attn_qkv.weight"; gate: "blk.N.ffn_up.weight", Phi-3's
  // gate and up). Null when none is there. Merged experts
  // ("blk.N.ffn_down_exps.weight") are found only by llama.cpp's name.
  const ImatrixEntry* Find(absl::string_view tensor_name) const;

  // llama-quantize's --include-weights / --exclude-weights: keeps only the
  // entries whose name contains one of `include` (when it is not empty), or
  // drops those containing one of `exclude`. Both non-empty is
  // InvalidArgument, as llama-quantize refuses them together.
  absl::Status Select(const std::vector<std::string>& include,
                      const std::vector<std::string>& exclude);

  // What llama-quantize passes to ggml_quantize_chunk for matrix `matrix`
  // (expert; ne[2] index) of the weight `tensor_name` (found as Find finds
  // it) that has `columns` columns (ne[0], the input dimension) and
  // `matrices` matrices (ne[2]; 1 for a 2-D weight): `columns` floats, one
  // per column, from Values() at matrix * columns. NotFound when there is no
  // entry (llama-quantize then quantizes without one); InvalidArgument when
  // the entry's value count is not columns x matrices (llama-quantize's
  // "imatrix size N is different from tensor size M"), when `matrix` is
  // outside [0, matrices), or when columns or matrices is not positive.
  absl::StatusOr<std::vector<float>> Importance(absl::string_view tensor_name, int64_t columns,
                                                int64_t matrices, int64_t matrix) const;
  // The same in the entry's own shape (its columns and matrices). A legacy
  // entry is one matrix of every expert's columns: give the weight's shape
  // to the overload above for a merged-expert tensor from a .dat.
  absl::StatusOr<std::vector<float>> Importance(absl::string_view tensor_name,
                                                int64_t matrix) const;

 private:
  std::map<std::string, ImatrixEntry, std::less<>> entries_;
};

// Reads an importance matrix in either format (see above). The file is
// mapped (io/mapped_file.h): only a regular file is read, and one that
// changes while it is read is DataLoss.
absl::StatusOr<Imatrix> ReadImatrix(const std::string& path);

// The same from a file image; errors name `file_name`.
absl::StatusOr<Imatrix> ParseImatrix(std::span<const uint8_t> file, absl::string_view file_name);

// Writes `imatrix` as llama-imatrix's GGUF. Refuses (naming the entry) an
// Imatrix with no entries (llama.cpp cannot read it back), chunk_size 0 (no
// llama-imatrix run has it; ReadImatrix refuses it), an entry that fails
// ValidateImatrixEntry (entries are checked again: they may have been
// changed since Add), a name too long for ggml once ".in_sum2" is added
// (more than 55 bytes), and a dataset name holding a NUL byte.
absl::Status WriteImatrixGguf(const Imatrix& imatrix, const std::string& path);

// Writes `imatrix` as llama-imatrix's legacy .dat (see above for what it
// loses). Refuses what WriteImatrixGguf refuses (but names up to 63 bytes
// fit), an Imatrix whose entries all have only zero counts (the file would
// have none), and what does not fit the format's int32 fields (nval, ncall,
// the chunk count) or float (a value times ncall).
absl::Status WriteImatrixDat(const Imatrix& imatrix, const std::string& path);

}  // namespace lowp

#endif  // LOWP_IO_IMATRIX_H_
