// A model's checkpoint opened for the forward pass, read a layer at a time.
// Open finds every tensor the config implies and checks its shape and dtype
// before anything is read; ReadLayer then widens one decoder layer's tensors
// to float32 into reusable buffers (exact for every floating dtype; GGUF
// blocks as ggml decodes them), and ReleaseLayer drops the file's pages, so
// memory holds about one layer whatever the model's size. The embedding and
// lm_head are read by rows.
//
// Tensors are found by their Hugging Face names, or by llama.cpp's in a GGUF
// file (io/gguf_names.h); for llama.cpp's architecture "llama" the rows of
// attn_q and attn_k are put back in Hugging Face's order (the converter
// permutes them for its rotary embedding). A GGUF file without output.weight
// reads lm_head from token_embd, as llama.cpp does.
#ifndef LOWP_MODEL_CHECKPOINT_H_
#define LOWP_MODEL_CHECKPOINT_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "io/tensor_set.h"
#include "model/config.h"
#include "model/weights.h"

namespace lowp {

// The two tables read by rows: the embedding, and lm_head (the embedding's
// values when the config ties them).
enum class Table { kEmbedding, kLmHead };

class Checkpoint {
 public:
  // Every tensor `config` implies must be in `set`, with the shape the config
  // gives and a floating dtype lowp decodes: InvalidArgument naming the
  // tensor, its file and the config fields its shape contradicts. With
  // `matrices_only` the norms and biases are not looked for (a candidate's
  // file: they come from the reference).
  static absl::StatusOr<Checkpoint> Open(const ModelConfig& config, TensorSet set,
                                         bool matrices_only = false);
  // `model` is a Hugging Face snapshot directory (config.json with
  // model.safetensors.index.json or model.safetensors), a config.json, or a
  // preset of ModelPresets; `tensors` (checkpoint files) overrides the
  // directory's and is required for the other two. A missing part is an
  // option error (formats/option_error.h) on the field "model" or "tensors".
  static absl::StatusOr<Checkpoint> OpenModel(const std::string& model,
                                              const std::vector<std::string>& tensors);

  Checkpoint(Checkpoint&&) noexcept;
  Checkpoint& operator=(Checkpoint&&) noexcept;
  ~Checkpoint();

  const ModelConfig& config() const { return config_; }
  const TensorSet& set() const { return *set_; }

  // Float32 bytes of one decoder layer's tensors.
  uint64_t LayerBytes() const;

  // Decoder layer `layer` as float32 views into `storage` (its buffers
  // reused), read on `threads` threads, each piece's file pages dropped once
  // widened (kept in the page cache with `keep_cached`: another pass reads
  // them again). With matrices_only, the views of the norms and biases are
  // empty.
  // With `experts_later`, a layer's routed experts are not read: their
  // matrices come with names and shapes only, and the layer's expert_source
  // reads each when the forward pass asks (ReadExpert).
  // With `matrices_later` too, its other matrices likewise: no values, and
  // the layer's matrix_source reads each (ReadMatrix).
  absl::StatusOr<LayerWeights> ReadLayer(int64_t layer, LayerStorage& storage, int threads,
                                         bool keep_cached = false, bool experts_later = false,
                                         bool matrices_later = false) const;
  // Matrix `m` of a layer (found by its name) with its values, into `into`
  // when given (its buffer reused); m's bias as given.
  absl::StatusOr<std::shared_ptr<const LoadedMatrix>> ReadMatrix(
      const Matrix& m, int threads, bool keep_cached,
      std::shared_ptr<LoadedMatrix> into = nullptr) const;
  // Routed expert `expert` of decoder layer `layer`: its matrices (and
  // biases) in buffers of its own.
  // Into `into` when given (its buffers reused), else a new one.
  absl::StatusOr<std::shared_ptr<const LoadedExpert>> ReadExpert(
      int64_t layer, int64_t expert, int threads, bool keep_cached,
      std::shared_ptr<LoadedExpert> into = nullptr) const;
  // Rows [first, first + count) of a table into `out` (count x hidden_size).
  absl::Status ReadRows(Table table, int64_t first, int64_t count, std::span<float> out,
                        int threads) const;
  // The final norm's weight (hidden_size values); not with matrices_only.
  absl::Status ReadFinalNorm(std::vector<float>& out) const;

  // Every matrix of the model by its Hugging Face name and shape (dtype F32,
  // no bytes): the embedding, each layer's (LayerWeights::Matrices order),
  // lm_head unless tied. What a recipe reads the model's facts off.
  std::vector<TensorView> MatrixShapes() const;

  // A table's tensor as stored and its Hugging Face name.
  const TensorView& TableView(Table table) const;
  std::string TableName(Table table) const;

  // Drops the pages a table's rows were read from; with `keep_cached` they
  // stay in the page cache for the next pass.
  void ReleaseRows(Table table, int64_t first, int64_t count, bool keep_cached) const;

  // TensorSet::CheckIntact: ask before reporting anything read.
  absl::Status CheckIntact() const;

  // Where a tensor is: the stored tensor behind Hugging Face name `name` and
  // the original row of each stored row (empty: the same order); null when
  // the checkpoint has no such tensor.
  //
  // A tensor stored inside another (gpt-oss's experts, stacked, gate and up
  // interleaved; Phi-3's fused qkv_proj and gate_up_proj) is a part: `view`
  // then describes it (its shape; its name says where it lies) and element
  // (r, c) is element base + r * row_stride + c * col_stride of `source`.
  struct Found {
    const TensorView* view = nullptr;
    std::vector<int64_t> row_of;
    const TensorView* source = nullptr;
    int64_t base = 0, row_stride = 0, col_stride = 1;
  };
  const Found* Find(const std::string& name) const;

 private:
  Checkpoint() = default;
  absl::Status Index();
  // The parts of gpt-oss's stacked experts and Phi-3's fused projections,
  // by the names the forward pass reads them under.
  absl::Status IndexParts();

  ModelConfig config_;
  std::unique_ptr<TensorSet> set_;
  bool matrices_only_ = false;
  std::map<std::string, Found> by_name_;
  // Views of a GGUF file's tensors under Hugging Face names: llama.cpp's
  // merged expert tensors (blk.N.ffn_*_exps, [experts, rows, cols]) as each
  // expert's matrix, Phi-3's attn_qkv and ffn_up as q, k, v and gate, up,
  // Qwen2-MoE's vector ffn_gate_inp_shexp as its [1, hidden] gate.
  std::deque<TensorView> expert_slices_;
  std::deque<TensorView> part_views_;  // Found::view of each part
};

// The checkpoint of a snapshot directory: model.safetensors.index.json, else
// model.safetensors; an option error on "tensors" when it has neither.
absl::StatusOr<std::vector<std::string>> SnapshotCheckpoint(const std::string& dir);

}  // namespace lowp

#endif  // LOWP_MODEL_CHECKPOINT_H_
