// Shared by the scheme tests: make a scheme by name, and run it over a tensor
// the way the streaming driver does (Observe over every chunk when the scheme
// asks for a tensor pass, then Apply chunk by chunk of ChunkRows rows).
#ifndef LOWP_TESTS_SCHEME_RUN_H_
#define LOWP_TESTS_SCHEME_RUN_H_

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "quant/scheme.h"

namespace lowp::testing {

inline std::unique_ptr<Scheme> Make(const std::string& name) {
  absl::StatusOr<std::unique_ptr<Scheme>> scheme = ParseScheme(name);
  EXPECT_TRUE(scheme.ok()) << name << ": " << scheme.status();
  return scheme.ok() ? std::move(*scheme) : nullptr;
}

struct Result {
  std::vector<float> out;
  SchemeCounts counts;
  StoredChunk stored;
  TensorContext context;
};

inline Result RunScheme(const Scheme& scheme, const std::vector<float>& in, int64_t cols,
                        bool keep_stored = true) {
  Result r;
  r.out.assign(in.size(), -12345.0f);  // a value no scheme writes
  const int64_t rows = static_cast<int64_t>(in.size()) / cols;
  const int64_t chunk = scheme.ChunkRows(cols);
  if (scheme.NeedsTensorPass()) {
    for (int64_t row = 0; row < rows; row += chunk) {
      const int64_t n = std::min(chunk, rows - row) * cols;
      TensorContext part;
      scheme.Observe(std::span<const float>(in).subspan(row * cols, n), cols, part);
      r.context.Merge(part);
    }
  }
  for (int64_t row = 0; row < rows; row += chunk) {
    const int64_t n = std::min(chunk, rows - row) * cols;
    TensorContext context = r.context;
    context.first_element = row * cols;
    scheme.Apply(std::span<const float>(in).subspan(row * cols, n), cols, context,
                 std::span<float>(r.out).subspan(row * cols, n), r.counts,
                 keep_stored ? &r.stored : nullptr);
  }
  return r;
}

}  // namespace lowp::testing

#endif  // LOWP_TESTS_SCHEME_RUN_H_
