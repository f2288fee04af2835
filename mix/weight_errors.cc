#include "mix/weight_errors.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "io/tensor_set.h"
#include "quant/measure.h"

namespace lowp {
namespace {

// Group g's sums over the rows measured, per type.
struct Sums {
  double error = 0, input = 0;
  bool overflow = false;
};

class ErrorPass {
 public:
  using Rows = std::function<absl::StatusOr<std::span<const float>>(int64_t, int64_t)>;

  ErrorPass(const Checkpoint& model, const MixTable& table, const std::vector<bool>& types,
            int threads)
      : model_(model), table_(table), types_(types),
        sums_(table.groups.size(), std::vector<Sums>(table.types.size())) {
    options_.threads = threads;
    options_.importance = table.importance;
    options_.release = [&model](std::span<const uint8_t> bytes) {
      model.set().Release(bytes, /*keep_cached=*/true);
    };
  }

  // `rows` x `cols` values of group g's matrix `name`, whose context the
  // types observe on `whole` (the values, or the table as stored), rows
  // [first, first + count) read by `read`.
  absl::Status Add(size_t g, const TensorView& whole, const Rows& read) {
    const int64_t rows = whole.rows(), cols = whole.cols();
    std::vector<TensorContext> contexts(table_.types.size());
    int64_t unit = 1;
    for (size_t t = 0; t < contexts.size(); ++t) {
      if (!types_[t]) continue;
      absl::StatusOr<TensorContext> c = ObserveTensor(whole, *table_.schemes[t], options_);
      if (!c.ok()) return c.status();
      contexts[t] = *std::move(c);
      unit = std::lcm(unit, std::max<int64_t>(1, table_.schemes[t]->ChunkRows(cols)));
    }
    std::vector<QuantReport> reports(table_.types.size());
    for (const auto& [first, count] : SampledRows(rows, cols, unit)) {
      absl::StatusOr<std::span<const float>> x = read(first, count);
      if (!x.ok()) return x.status();
      const TensorView window = F32View(whole.name, count, cols, *x);
      out_.resize(x->size());
      for (size_t t = 0; t < contexts.size(); ++t) {
        if (!types_[t]) continue;
        if (absl::Status s = QuantizeWindow(window, first, *table_.schemes[t], contexts[t],
                                            options_, out_, &reports[t]);
            !s.ok()) {
          return s;
        }
      }
    }
    for (size_t t = 0; t < reports.size(); ++t) {
      const QuantReport& r = reports[t];
      Sums& s = sums_[g][t];
      s.overflow |= r.overflowed();
      s.error += r.weighted ? r.weighted_squared_error : r.stats.sum_squared_error;
      s.input += r.weighted ? r.weighted_squared_input : r.stats.sum_squared_input;
    }
    return absl::OkStatus();
  }

  // A matrix whose values are in memory.
  absl::Status AddMatrix(size_t g, const Matrix& m) {
    const TensorView whole = F32View(m.name, m.rows, m.cols, m.values);
    const Rows rows = [&](int64_t first, int64_t count) -> absl::StatusOr<std::span<const float>> {
      return m.values.subspan(static_cast<size_t>(first * m.cols),
                              static_cast<size_t>(count * m.cols));
    };
    return Add(g, whole, rows);
  }

  // The embedding or lm_head, its sampled rows read from the checkpoint.
  absl::Status AddTable(size_t g, Table which, int threads) {
    TensorView whole = model_.TableView(which);
    whole.name = model_.TableName(which);
    const int64_t cols = whole.cols();
    const Rows rows = [&](int64_t first, int64_t count) -> absl::StatusOr<std::span<const float>> {
      rows_.resize(static_cast<size_t>(count * cols));
      if (absl::Status s = model_.ReadRows(which, first, count, rows_, threads); !s.ok()) return s;
      return std::span<const float>(rows_);
    };
    return Add(g, whole, rows);
  }

  std::vector<std::vector<double>> Result() const {
    std::vector<std::vector<double>> out(sums_.size(),
                                         std::vector<double>(table_.types.size(), NAN));
    for (size_t g = 0; g < sums_.size(); ++g) {
      if (!measured_.contains(g)) continue;
      for (size_t t = 0; t < types_.size(); ++t) {
        if (!types_[t]) continue;
        const Sums& s = sums_[g][t];
        out[g][t] = s.overflow           ? INFINITY
                    : s.error == 0       ? 0.0
                    : s.input == 0       ? INFINITY
                                         : s.error / s.input;
      }
    }
    return out;
  }
  void Measured(size_t g) { measured_.insert(g); }

 private:
  const Checkpoint& model_;
  const MixTable& table_;
  const std::vector<bool>& types_;
  MeasureOptions options_;
  std::vector<std::vector<Sums>> sums_;
  std::set<size_t> measured_;
  std::vector<float> out_, rows_;
};

}  // namespace

std::vector<std::pair<int64_t, int64_t>> SampledRows(int64_t rows, int64_t cols, int64_t unit) {
  if (rows <= 0) return {};
  if (rows * cols <= kErrorWholeElements || rows <= kErrorWindows * unit) return {{0, rows}};
  // kErrorWindows windows of equal length, together about kErrorSampleElements.
  const int64_t want = std::max<int64_t>(1, kErrorSampleElements / std::max<int64_t>(1, cols));
  const int64_t length = std::max<int64_t>(1, (want + kErrorWindows - 1) / kErrorWindows);
  const int64_t count = (length + unit - 1) / unit * unit;
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t i = 0; i < kErrorWindows; ++i) {
    int64_t first = i * rows / kErrorWindows / unit * unit;
    first = std::min(first, (rows - count) / unit * unit);
    if (!out.empty() && first < out.back().first + out.back().second) continue;
    out.push_back({first, std::min(count, rows - first)});
  }
  return out;
}

absl::StatusOr<std::vector<std::vector<double>>> MeasureWeightErrors(
    const Checkpoint& model, const MixTable& table, const std::vector<bool>& types,
    const std::function<bool(size_t group)>& takes, const MixRun& run) {
  const ModelConfig& config = model.config();
  ErrorPass pass(model, table, types, run.threads);
  // The groups taken, by layer (-1: the tables).
  std::map<int64_t, std::vector<size_t>> by_layer;
  for (size_t g = 0; g < table.groups.size(); ++g) {
    if (takes && !takes(g)) continue;
    by_layer[table.groups[g].layer].push_back(g);
    pass.Measured(g);
  }
  const int64_t steps = static_cast<int64_t>(by_layer.size());
  int64_t done = 0;
  auto step = [&](const std::string& what) {
    if (run.progress) run.progress(done++, steps, absl::StrCat("weight errors: ", what));
  };
  auto group_of = [&](const std::vector<size_t>& groups,
                      const std::string& name) -> std::optional<size_t> {
    for (size_t g : groups) {
      if (MatchesPattern(table.groups[g].pattern(), name)) return g;
    }
    return std::nullopt;
  };
  LayerStorage storage;
  for (const auto& [layer, groups] : by_layer) {
    if (layer < 0) {
      step("embedding and output");
      for (size_t g : groups) {
        const Table which = table.groups[g].name == model.TableName(Table::kEmbedding)
                                ? Table::kEmbedding
                                : Table::kLmHead;
        if (absl::Status s = pass.AddTable(g, which, run.threads); !s.ok()) return s;
      }
      continue;
    }
    step(absl::StrCat("layer ", layer));
    // Every matrix read when it is measured, one at a time.
    absl::StatusOr<LayerWeights> w =
        model.ReadLayer(layer, storage, run.threads, /*keep_cached=*/false,
                        /*experts_later=*/true, /*matrices_later=*/true);
    if (!w.ok()) return w.status();
    std::set<const Matrix*> routed;
    for (size_t e = 0; e < w->experts.size(); ++e) {
      const Expert& x = w->experts[e];
      routed.insert({&x.gate, &x.up, &x.down});
      std::shared_ptr<const LoadedExpert> loaded;
      for (const Matrix* m : {&x.gate, &x.up, &x.down}) {
        const std::optional<size_t> g = group_of(groups, m->name);
        if (!g.has_value()) continue;
        if (loaded == nullptr && w->expert_source != nullptr) {
          absl::StatusOr<std::shared_ptr<const LoadedExpert>> l =
              w->expert_source->Load(static_cast<int64_t>(e), run.threads);
          if (!l.ok()) return l.status();
          loaded = *std::move(l);
        }
        const Expert& values = loaded != nullptr ? loaded->matrices : x;
        const Matrix& v = m == &x.gate ? values.gate : m == &x.up ? values.up : values.down;
        if (absl::Status s = pass.AddMatrix(*g, v); !s.ok()) return s;
      }
    }
    for (const LayerWeights::Entry& entry : w->Matrices(config)) {
      const Matrix& m = *entry.matrix;
      if (routed.contains(&m)) continue;
      const std::optional<size_t> g = group_of(groups, m.name);
      if (!g.has_value()) continue;
      if (!m.values.empty() || w->matrix_source == nullptr) {
        if (absl::Status s = pass.AddMatrix(*g, m); !s.ok()) return s;
        continue;
      }
      absl::StatusOr<std::shared_ptr<const LoadedMatrix>> loaded =
          w->matrix_source->Load(m, run.threads);
      if (!loaded.ok()) return loaded.status();
      if (absl::Status s = pass.AddMatrix(*g, (*loaded)->matrix); !s.ok()) return s;
    }
  }
  if (run.progress) run.progress(done, steps, "weight errors");
  if (absl::Status s = model.CheckIntact(); !s.ok()) return s;
  return pass.Result();
}

}  // namespace lowp
