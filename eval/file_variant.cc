// A candidate's weights from another checkpoint of the model (eval/variant.h):
// a GGUF file llama.cpp made from it, its q and k rows put back in order, or
// any safetensors file with the reference's names; the matrices as stored.
#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "eval/variant.h"
#include "eval/variant_parts.h"
#include "io/tensor_set.h"
#include "kernels/thread_pool.h"

namespace lowp {
namespace {

using variant_parts::CompareInto;
using variant_parts::ExpertEntries;
using variant_parts::MatrixEntries;
using variant_parts::kEmbeddingKey;
using variant_parts::kHeadKey;
using variant_parts::LayerKey;

class FileVariant : public WeightVariant {
 public:
  FileVariant(std::string spec, Checkpoint file, const Checkpoint& reference)
      : WeightVariant(std::move(spec)), file_(std::move(file)), reference_(reference) {}

  absl::Status Prepare(int threads) override {
    if (reference_.config().tie_word_embeddings) return absl::OkStatus();
    // The embedding compared with the reference's in pieces of rows.
    const ModelConfig& c = reference_.config();
    const int64_t D = c.hidden_size, V = c.vocab_size;
    const int64_t piece = std::max<int64_t>(1, (int64_t{1} << 22) / D);
    QuantReport report = Start(Table::kEmbedding);
    std::vector<float> x, q;
    for (int64_t first = 0; first < V; first += piece) {
      const int64_t rows = std::min(piece, V - first);
      x.resize(static_cast<size_t>(rows * D));
      q.resize(x.size());
      if (absl::Status s = reference_.ReadRows(Table::kEmbedding, first, rows, x, threads);
          !s.ok()) {
        return s;
      }
      if (absl::Status s = file_.ReadRows(Table::kEmbedding, first, rows, q, threads); !s.ok()) {
        return s;
      }
      reference_.ReleaseRows(Table::kEmbedding, first, rows, /*keep_cached=*/true);
      file_.ReleaseRows(Table::kEmbedding, first, rows, /*keep_cached=*/true);
      CompareInto(x, q, D, threads, report.stats);
    }
    Keep(kEmbeddingKey, std::move(report));
    return absl::OkStatus();
  }

  absl::StatusOr<LayerWeights> Layer(const LayerRequest& request) override {
    const int threads = request.threads;
    const bool experts_later = request.reference.expert_source != nullptr;
    const bool matrices_later = request.reference.matrix_source != nullptr;
    absl::StatusOr<LayerWeights> stored =
        file_.ReadLayer(request.layer, request.storage, threads, request.pass.another_follows,
                        experts_later, matrices_later);
    if (!stored.ok()) return stored.status();
    LayerWeights out = request.reference;
    std::vector<LayerWeights::Entry> mine = out.Matrices(reference_.config());
    std::vector<LayerWeights::Entry> theirs = stored->Matrices(reference_.config());
    if (experts_later) {
      out.expert_source = std::make_shared<FileExperts>(
          *this, stored->expert_source, request.reference.expert_source, request.layer,
          ExpertEntries(out, mine), request.pass.first);
    }
    if (matrices_later) {
      out.matrix_source = std::make_shared<FileMatrices>(
          *this, stored->matrix_source, request.reference.matrix_source, request.layer,
          MatrixEntries(mine), request.pass.first);
    }
    for (size_t j = 0; j < mine.size(); ++j) {
      Matrix& m = *mine[j].matrix;
      // Read one at a time: FileExperts, FileMatrices.
      if ((experts_later || matrices_later) && m.values.empty()) continue;
      if (request.pass.first) {
        const Checkpoint::Found* f = file_.Find(m.name);
        QuantReport report = Start(*f->view, m.name);
        CompareInto(m.values, theirs[j].matrix->values, m.cols, threads, report.stats);
        Keep(LayerKey(request.layer, j), std::move(report));
      }
      m.values = theirs[j].matrix->values;
      m.stored_type = theirs[j].matrix->stored_type;
    }
    return out;
  }

  bool Changes(Table) const override { return true; }

  const ggml::TypeInfo* HeadType() const override {
    return StoredGgmlType(file_.TableView(Table::kLmHead));
  }

  absl::Status CheckIntact() const override { return file_.CheckIntact(); }

  absl::Status EmbeddingRows(std::span<const int32_t> ids, std::span<float> out, int threads,
                             const PassOptions& pass) override {
    const int64_t D = reference_.config().hidden_size;
    std::vector<absl::Status> errors(ids.size());
    ParallelFor(ids.size(), threads, [&](size_t i) {
      errors[i] =
          file_.ReadRows(Table::kEmbedding, ids[i], 1,
                         out.subspan(i * static_cast<size_t>(D), static_cast<size_t>(D)), 1);
      file_.ReleaseRows(Table::kEmbedding, ids[i], 1, pass.another_follows);
    });
    for (const absl::Status& s : errors) {
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::span<const float>> HeadRows(int64_t first, int64_t count,
                                                  std::span<const float> reference_rows,
                                                  int threads, const PassOptions& pass) override {
    const ModelConfig& c = reference_.config();
    head_.resize(reference_rows.size());
    if (absl::Status s = file_.ReadRows(Table::kLmHead, first, count, head_, threads); !s.ok()) {
      return s;
    }
    file_.ReleaseRows(Table::kLmHead, first, count, pass.another_follows);
    if (pass.first) {
      if (first == 0) head_report_ = Start(Table::kLmHead);
      CompareInto(reference_rows, head_, c.hidden_size, threads, head_report_.stats);
      if (first + count == c.vocab_size) {
        Keep(c.tie_word_embeddings ? kEmbeddingKey : kHeadKey, std::move(head_report_));
      }
    }
    return std::span<const float>(head_);
  }

 private:
  // A report of a stored tensor under the reference's name: its type as the
  // scheme, its bytes as the storage.
  QuantReport Start(const TensorView& stored, const std::string& name) const {
    QuantReport r;
    r.tensor = name;
    r.scheme = stored.type_name();
    r.dtype = "F32";
    r.shape = stored.shape;
    r.elements = static_cast<uint64_t>(stored.elements());
    r.storage_bits = stored.stored_bytes() * 8;  // codes, scales and zero points
    return r;
  }
  QuantReport Start(Table table) const {
    const std::string name = reference_.TableName(table);
    QuantReport r = Start(file_.TableView(table), name);
    r.shape = {reference_.config().vocab_size, reference_.config().hidden_size};
    return r;
  }

  void Keep(int64_t key, QuantReport report) {
    if (scheme_names_.empty()) {
      scheme_names_ = report.scheme;
    } else if (scheme_names_ != report.scheme) {
      scheme_names_ = "mixed";
    }
    reports_[key] = std::move(report);
  }

  // The file's experts as the forward pass loads them, compared with the
  // reference's in the first pass.
  class FileExperts : public ExpertSource {
   public:
    FileExperts(FileVariant& variant, std::shared_ptr<const ExpertSource> file,
                std::shared_ptr<const ExpertSource> reference, int64_t layer,
                std::vector<size_t> entries, bool first)
        : variant_(variant),
          file_(std::move(file)),
          reference_(std::move(reference)),
          layer_(layer),
          entries_(std::move(entries)),
          first_(first) {}

    absl::StatusOr<std::shared_ptr<const LoadedExpert>> Load(int64_t e,
                                                             int threads) const override {
      absl::StatusOr<std::shared_ptr<const LoadedExpert>> theirs = file_->Load(e, threads);
      if (!theirs.ok()) return theirs;
      // The file's matrices with the reference's biases (gpt-oss's; copied),
      // as Layer takes the rest.
      const bool biases = variant_.reference_.config().expert_bias;
      if (!first_ && !biases) return theirs;
      absl::StatusOr<std::shared_ptr<const LoadedExpert>> ref = reference_->Load(e, threads);
      if (!ref.ok()) return ref.status();
      std::shared_ptr<const LoadedExpert> result = *theirs;
      if (biases) {
        auto out = std::make_shared<LoadedExpert>();
        out->matrices = (*theirs)->matrices;
        out->from = *theirs;
        const Matrix* r[] = {&(*ref)->matrices.gate, &(*ref)->matrices.up, &(*ref)->matrices.down};
        Matrix* m[] = {&out->matrices.gate, &out->matrices.up, &out->matrices.down};
        for (size_t k = 0; k < 3; ++k) {
          std::span<float> bias = out->storage.Buffer(k, r[k]->bias.size());
          std::copy(r[k]->bias.begin(), r[k]->bias.end(), bias.begin());
          m[k]->bias = bias;
        }
        result = std::move(out);
      }
      if (!first_) return result;
      const Matrix* a[] = {&(*ref)->matrices.gate, &(*ref)->matrices.up, &(*ref)->matrices.down};
      const Matrix* b[] = {&(*theirs)->matrices.gate, &(*theirs)->matrices.up,
                           &(*theirs)->matrices.down};
      for (size_t k = 0; k < 3; ++k) {
        QuantReport report = variant_.Start(*variant_.file_.Find(b[k]->name)->view, a[k]->name);
        CompareInto(a[k]->values, b[k]->values, a[k]->cols, threads, report.stats);
        std::lock_guard<std::mutex> lock(variant_.keep_mutex_);
        variant_.Keep(LayerKey(layer_, entries_[static_cast<size_t>(e)] + k), std::move(report));
      }
      return result;
    }

   private:
    FileVariant& variant_;
    std::shared_ptr<const ExpertSource> file_, reference_;
    const int64_t layer_;
    const std::vector<size_t> entries_;
    const bool first_;
  };

  // The file's other matrices as the forward pass loads them (with the
  // reference's biases, as Layer takes them), compared with the reference's
  // in the first pass.
  class FileMatrices : public MatrixSource {
   public:
    FileMatrices(FileVariant& variant, std::shared_ptr<const MatrixSource> file,
                 std::shared_ptr<const MatrixSource> reference, int64_t layer,
                 std::map<std::string, std::pair<size_t, bool>> entries, bool first)
        : variant_(variant),
          file_(std::move(file)),
          reference_(std::move(reference)),
          layer_(layer),
          entries_(std::move(entries)),
          first_(first) {}

    absl::StatusOr<std::shared_ptr<const LoadedMatrix>> Load(const Matrix& m,
                                                             int threads) const override {
      // m carries the reference's bias: the file's values come with it.
      absl::StatusOr<std::shared_ptr<const LoadedMatrix>> theirs = file_->Load(m, threads);
      if (!theirs.ok() || !first_) return theirs;
      absl::StatusOr<std::shared_ptr<const LoadedMatrix>> ref = reference_->Load(m, threads);
      if (!ref.ok()) return ref.status();
      const auto it = entries_.find(m.name);
      if (it == entries_.end()) return absl::InternalError(absl::StrCat("no matrix ", m.name));
      QuantReport report = variant_.Start(*variant_.file_.Find(m.name)->view, m.name);
      CompareInto((*ref)->matrix.values, (*theirs)->matrix.values, m.cols, threads, report.stats);
      std::lock_guard<std::mutex> lock(variant_.keep_mutex_);
      variant_.Keep(LayerKey(layer_, it->second.first), std::move(report));
      return theirs;
    }

   private:
    FileVariant& variant_;
    std::shared_ptr<const MatrixSource> file_, reference_;
    const int64_t layer_;
    const std::map<std::string, std::pair<size_t, bool>> entries_;
    const bool first_;
  };

  Checkpoint file_;
  const Checkpoint& reference_;
  std::vector<float> head_;
  QuantReport head_report_;
  std::mutex keep_mutex_;  // Keep from FileExperts::Load, on the forward pass's threads
};

}  // namespace

absl::StatusOr<std::unique_ptr<WeightVariant>> WeightVariant::FromFile(
    const std::string& path, const Checkpoint& reference) {
  absl::StatusOr<TensorSet> set = TensorSet::Open(path);
  if (!set.ok()) return set.status();
  absl::StatusOr<Checkpoint> file =
      Checkpoint::Open(reference.config(), *std::move(set), /*matrices_only=*/true);
  if (!file.ok()) return file.status();
  return std::unique_ptr<WeightVariant>(new FileVariant(path, *std::move(file), reference));
}

}  // namespace lowp
