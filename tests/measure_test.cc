// The streaming measurement against a plain computation over the whole
// tensor; chunking, batches and threads never change a result; the range
// study on crafted values; and every scheme on the real checkpoints, with the
// bf16 and fp16 cast errors checked against independent roundings.
#include "quant/measure.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "formats/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "quant/range.h"
#include "quant/scheme.h"
#include "io/tensor_set.h"
#include "tests/scheme_run.h"

namespace lowp {
namespace {

using ::testing::HasSubstr;

using testing::Make;

// A float32 tensor over its own bytes.
struct OwnedTensor {
  std::vector<float> values;
  TensorView view;
  OwnedTensor(std::vector<float> v, std::vector<int64_t> shape) : values(std::move(v)) {
    view.name = "t";
    view.file = "memory";
    view.dtype = DType::kF32;
    view.shape = std::move(shape);
    view.bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(values.data()),
                                          values.size() * sizeof(float));
  }
};

std::vector<float> Random(size_t n, uint64_t seed, bool specials) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  if (specials) {
    x[3] = std::nanf("");
    x[n / 2] = INFINITY;
    x[n - 5] = -INFINITY;
    x[7] = 0.0f;
    x[11] = 1e-30f;
  }
  return x;
}

// The metrics computed plainly from one Apply over the whole tensor.
QuantReport Plain(const Scheme& scheme, const std::vector<float>& x, int64_t cols, float floor) {
  TensorContext context;
  if (scheme.NeedsTensorPass()) scheme.Observe(x, cols, context);
  std::vector<float> q(x.size());
  QuantReport r;
  scheme.Apply(x, cols, context, q, r.counts);
  for (size_t i = 0; i < x.size(); ++i) {
    ++r.stats.count;
    if (std::isnan(x[i])) ++r.stats.nan_inputs;
    if (std::isinf(x[i])) ++r.stats.inf_inputs;
    if (!std::isfinite(x[i])) continue;
    if (!std::isfinite(q[i])) {
      ++r.stats.nonfinite_outputs;
      continue;
    }
    // The rule of kernels/error_stats.h: e and r float operations where
    // |x|, |q| <= 2^60 (and r finite), double elsewhere.
    const bool in_range = std::fabs(x[i]) <= kFloatRange && std::fabs(q[i]) <= kFloatRange;
    const double e = in_range ? double{q[i] - x[i]} : double{q[i]} - x[i];
    ++r.stats.measured;
    r.stats.sum_squared_error += e * e;
    r.stats.sum_squared_input += double{x[i]} * x[i];
    r.stats.sum_squared_output += double{q[i]} * q[i];
    r.stats.sum_product += double{x[i]} * q[i];
    r.stats.sum_abs_error += std::fabs(e);
    r.stats.max_abs_error = std::max(r.stats.max_abs_error, std::fabs(e));
    if (x[i] != 0 && q[i] == 0) ++r.stats.zeroed;
    if (std::fabs(x[i]) >= floor && x[i] != 0) {
      const float rf = in_range ? std::fabs(q[i] - x[i]) / std::fabs(x[i]) : 0.0f;
      const double rel =
          in_range && std::isfinite(rf) ? double{rf} : std::fabs(e) / std::fabs(double{x[i]});
      ++r.stats.relative_count;
      r.stats.sum_relative_error += rel;
      r.stats.sum_squared_relative_error += rel * rel;
      r.stats.max_relative_error = std::max(r.stats.max_relative_error, rel);
    }
  }
  return r;
}

void ExpectSameReport(const QuantReport& got, const QuantReport& want) {
  EXPECT_EQ(got.stats.count, want.stats.count);
  EXPECT_EQ(got.stats.nan_inputs, want.stats.nan_inputs);
  EXPECT_EQ(got.stats.inf_inputs, want.stats.inf_inputs);
  EXPECT_EQ(got.stats.nonfinite_outputs, want.stats.nonfinite_outputs);
  EXPECT_EQ(got.stats.measured, want.stats.measured);
  EXPECT_EQ(got.stats.zeroed, want.stats.zeroed);
  EXPECT_EQ(got.stats.relative_count, want.stats.relative_count);
  EXPECT_EQ(got.counts.clipped, want.counts.clipped);
  EXPECT_EQ(got.counts.subnormal, want.counts.subnormal);
  EXPECT_EQ(got.stats.max_abs_error, want.stats.max_abs_error);
  EXPECT_EQ(got.stats.max_relative_error, want.stats.max_relative_error);
  // Sums: within the bound of kernels/error_stats.h, B = 21 * 2^-24 relative
  // on each sum (2B between two results, 4B on a ratio of two sums).
  const double b = 2 * 21 * 0x1p-24;
  EXPECT_NEAR(got.mse(), want.mse(), b * want.mse());
  EXPECT_NEAR(got.sqnr_db(), want.sqnr_db(), 10 * std::log10(1 + 2 * b));
  EXPECT_NEAR(got.cosine(), want.cosine(), 2 * b);
  EXPECT_NEAR(got.mean_abs_error(), want.mean_abs_error(), b * want.mean_abs_error());
  EXPECT_NEAR(got.mean_relative_error(), want.mean_relative_error(),
              b * want.mean_relative_error());
  EXPECT_NEAR(got.rms_relative_error(), want.rms_relative_error(), b * want.rms_relative_error());
}

TEST(MeasureTensor, EqualsAPlainComputationOverTheWholeTensor) {
  // 700 rows of 100: several chunks (2^15 elements each), awkward groups.
  OwnedTensor t(Random(700 * 100, 1, true), {700, 100});
  for (const std::string name : {"fp8_e4m3fn", "int4-g32", "int8", "uint4-g64-asym", "q4_0",
                                 "mxfp4", "nvfp4", "nf4:double-quant", "fp8_e4m3fn-tensor"}) {
    SCOPED_TRACE(name);
    const auto scheme = Make(name);
    absl::StatusOr<QuantReport> got = MeasureTensor(t.view, *scheme);
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectSameReport(*got, Plain(*scheme, t.values, 100, MeasureOptions{}.relative_floor));
    EXPECT_EQ(got->tensor, "t");
    EXPECT_EQ(got->scheme, scheme->name());
    EXPECT_EQ(got->elements, 70000u);
    EXPECT_EQ(got->storage_bits, scheme->StorageBits(700, 100));
    EXPECT_EQ(got->stats.nan_inputs, 1u);
    EXPECT_EQ(got->stats.inf_inputs, 2u);
  }
}

// Every element of every block overflows (fp8 without saturation, q8_0's
// fp16 scale): nothing is measured, and the metrics say the error is
// infinite, never rmse 0, SQNR inf and cosine 1 from the empty sums (issue 29).
TEST(MeasureTensor, ABlockThatOverflowsWholeIsAnInfiniteError) {
  std::vector<float> values(4 * 64, 3e38f);
  for (size_t i = 0; i < values.size(); i += 2) values[i] = -values[i];
  OwnedTensor t(values, {4, 64});
  for (const std::string name : {"fp8_e4m3fn", "fp8_e5m2", "fp16", "q8_0", "q4_0"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<QuantReport> got = MeasureTensor(t.view, *Make(name));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->stats.nonfinite_outputs, values.size());
    EXPECT_EQ(got->stats.measured, 0u);
    EXPECT_TRUE(got->overflowed());
    EXPECT_TRUE(std::isinf(got->rmse()) && got->rmse() > 0);
    EXPECT_TRUE(std::isinf(got->max_abs_error()) && got->max_abs_error() > 0);
    EXPECT_TRUE(std::isinf(got->sqnr_db()) && got->sqnr_db() < 0);
    EXPECT_TRUE(std::isnan(got->cosine()));
  }
}

TEST(MeasureTensor, ThreadsAndBatchesNeverChangeAResult) {
  // 5 x 2^20 elements: more than one batch of 2^22, rows of 1024.
  OwnedTensor t(Random(5 << 20, 2, true), {5 << 10, 1024});
  for (const std::string name : {"bf16:rounding=stochastic:seed=3", "int4-g128"}) {
    SCOPED_TRACE(name);
    const auto scheme = Make(name);
    MeasureOptions one, two;
    one.threads = 1;
    two.threads = 2;
    absl::StatusOr<QuantReport> a = MeasureTensor(t.view, *scheme, one);
    absl::StatusOr<QuantReport> b = MeasureTensor(t.view, *scheme, two);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(std::memcmp(&a->stats, &b->stats, sizeof(ErrorStats)), 0);  // bit for bit
    // The streamed output equals one Apply over the whole tensor.
    std::vector<float> streamed;
    ASSERT_TRUE(QuantizeTensor(
                    t.view, *scheme, two,
                    [&](std::span<const float> piece) {
                      streamed.insert(streamed.end(), piece.begin(), piece.end());
                      return absl::OkStatus();
                    },
                    nullptr)
                    .ok());
    std::vector<float> whole(t.values.size());
    SchemeCounts counts;
    scheme->Apply(t.values, 1024, TensorContext{}, whole, counts);
    ASSERT_EQ(streamed.size(), whole.size());
    EXPECT_EQ(std::memcmp(streamed.data(), whole.data(), whole.size() * sizeof(float)), 0);
  }
}

TEST(MeasureTensor, ReleasesEveryByteOnceBatchByBatch) {
  // 5 x 2^20 elements = a batch of 2^22 and a short one. A per-tensor scheme
  // reads the tensor twice but releases it once, after its second pass: the
  // first leaves the pages in the page cache for the second.
  OwnedTensor t(Random(5 << 20, 4, false), {5 << 10, 1024});
  for (const std::string name : {"int8-channel", "int8"}) {
    SCOPED_TRACE(name);
    std::vector<std::span<const uint8_t>> released;
    MeasureOptions options;
    options.release = [&](std::span<const uint8_t> b) { released.push_back(b); };
    ASSERT_TRUE(MeasureTensor(t.view, *Make(name), options).ok());
    ASSERT_EQ(released.size(), 2u);
    const uint8_t* next = t.view.bytes.data();
    for (const auto& b : released) {
      EXPECT_EQ(b.data(), next);
      EXPECT_LE(b.size(), size_t{4} << 22);  // a batch at most
      next = b.data() + b.size();
    }
    EXPECT_EQ(next, t.view.bytes.data() + t.view.bytes.size());  // the whole tensor, once
  }
}

const std::string kData = LOWP_TEST_DATA_DIR "/stories260K/";

TEST(MeasureTensors, AllSchemesInOneReadEqualEachAlone) {
  // quant-error and plan hand each chunk to every scheme in one read: the
  // reports equal one scheme at a time, field by field (the double sums too:
  // the chunks are the same, so is the order of summation), including
  // schemes that need a tensor pass or whole groups of rows.
  absl::StatusOr<TensorSet> set = TensorSet::Open(kData + "stories260K.f32.safetensors");
  ASSERT_TRUE(set.ok()) << set.status();
  std::vector<const TensorView*> tensors;
  for (const TensorView& t : set->tensors()) tensors.push_back(&t);
  std::vector<std::unique_ptr<Scheme>> schemes;
  for (const char* name : {"bf16", "fp8_e4m3fn", "int8-channel", "int4-g128", "nf4", "mxfp4",
                           "q4_0", "int8", "nf4:double-quant", "fp8_e4m3fn-tensor",
                           "bf16:rounding=stochastic:seed=5", "Q4_K_M"}) {
    schemes.push_back(Make(name));
  }
  MeasureOptions options;
  options.histogram = true;
  absl::StatusOr<SetReports> together = MeasureTensors(*set, tensors, schemes, options, nullptr);
  ASSERT_TRUE(together.ok()) << together.status();
  ASSERT_EQ(together->results.size(), tensors.size() * schemes.size());
  for (size_t s = 0; s < schemes.size(); ++s) {
    std::span<const std::unique_ptr<Scheme>> one(&schemes[s], 1);
    absl::StatusOr<SetReports> alone = MeasureTensors(*set, tensors, one, options, nullptr);
    ASSERT_TRUE(alone.ok()) << alone.status();
    for (size_t t = 0; t < tensors.size(); ++t) {
      const QuantReport& a = alone->results[t];
      const QuantReport& b = together->results[t * schemes.size() + s];
      SCOPED_TRACE(a.tensor + " " + a.scheme);
      EXPECT_EQ(a.tensor, b.tensor);
      EXPECT_EQ(a.scheme, b.scheme);
      EXPECT_EQ(a.applied, b.applied);
      EXPECT_EQ(a.storage_bits, b.storage_bits);
      EXPECT_EQ(std::memcmp(&a.stats, &b.stats, sizeof(ErrorStats)), 0);
      EXPECT_EQ(a.counts.clipped, b.counts.clipped);
      EXPECT_EQ(a.counts.subnormal, b.counts.subnormal);
      EXPECT_EQ(a.histogram, b.histogram);
    }
  }
}

TEST(MeasureTensor, SinkErrorsStopTheRunAndNameTheTensor) {
  OwnedTensor t(Random(1000, 3, false), {10, 100});
  absl::Status s = QuantizeTensor(
      t.view, *Make("fp16"), {},
      [](std::span<const float>) { return absl::DataLossError("disk full"); }, nullptr);
  EXPECT_THAT(s.message(), HasSubstr("disk full"));
  EXPECT_THAT(s.message(), HasSubstr("'t'"));
}

TEST(MeasureTensor, RejectsNonFloatingTensorsByName) {
  std::vector<int32_t> ints(4);
  TensorView view;
  view.name = "model.ids";
  view.file = "x.safetensors";
  view.dtype = DType::kI32;
  view.shape = {4};
  view.bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(ints.data()), 16);
  absl::StatusOr<QuantReport> r = MeasureTensor(view, *Make("int8"));
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("'model.ids' in x.safetensors is I32"));
}

TEST(QuantReport, AggregatesWeighByElements) {
  QuantReport a, b;
  a.elements = a.stats.measured = 1;
  a.stats.sum_squared_error = 4;  // mse 4
  b.elements = b.stats.measured = 3;
  b.stats.sum_squared_error = 0;
  a.storage_bits = 8;
  b.storage_bits = 24;
  a.Add(b);
  EXPECT_DOUBLE_EQ(a.mse(), 1.0);
  EXPECT_DOUBLE_EQ(a.bits_per_weight(), 8.0);
  // Nothing measured is unknown, never a perfect score.
  EXPECT_TRUE(std::isnan(QuantReport{}.sqnr_db()));
  EXPECT_TRUE(std::isnan(QuantReport{}.rmse()));
  // A finite input made inf or NaN: infinite error, whatever else was exact.
  a.stats.nonfinite_outputs = 1;
  EXPECT_TRUE(std::isinf(a.rmse()) && a.rmse() > 0);
  EXPECT_TRUE(std::isinf(a.sqnr_db()) && a.sqnr_db() < 0);
  EXPECT_TRUE(std::isnan(a.cosine()));
}

TEST(StudyRange, CraftedValuesInFp16) {
  // 70000 overflows fp16 (max 65504); 6e-5 and 3e-6 are below 2^-14 = 6.1e-5
  // and land in the subnormal range; 1e-8 is below half the smallest
  // subnormal (2^-25 = 3e-8) and flushes to 0; 1 and 0 are exact.
  OwnedTensor t({70000.0f, 1e-8f, 6e-5f, 1.0f, 0.0f, -3e-6f, NAN}, {7});
  absl::StatusOr<std::vector<RangeRow>> rows =
      StudyRange(t.view, {*FindFormat("fp16"), *FindFormat("bf16")});
  ASSERT_TRUE(rows.ok()) << rows.status();
  const RangeRow& fp16 = (*rows)[0];
  EXPECT_EQ(fp16.format, "fp16");
  EXPECT_EQ(fp16.elements, 7u);
  EXPECT_EQ(fp16.finite, 6u);
  EXPECT_EQ(fp16.nonzero, 5u);
  EXPECT_EQ(fp16.absmax, 70000.0);
  EXPECT_EQ(fp16.min_nonzero, double{1e-8f});
  EXPECT_EQ(fp16.overflow, 1u);
  EXPECT_EQ(fp16.subnormal, 2u);
  EXPECT_EQ(fp16.flushed, 1u);
  EXPECT_EQ(fp16.max_relative_error, 1.0);  // the flushed value
  // Largest k with 70000 * 2^k <= 65504: k = -1. Smallest k with every
  // nonzero value (fraction 0.999 of 5 needs all 5) at or above 2^-14:
  // 1e-8 is in binade -27, so k = -14 + 27 = 13. No window exists.
  EXPECT_EQ(fp16.max_scale_log2, -1);
  EXPECT_EQ(fp16.min_scale_log2, 13);
  // bf16 holds all of them: no overflow, nothing subnormal, 8-bit precision.
  const RangeRow& bf16 = (*rows)[1];
  EXPECT_EQ(bf16.overflow, 0u);
  EXPECT_EQ(bf16.subnormal, 0u);
  EXPECT_EQ(bf16.flushed, 0u);
  EXPECT_LE(bf16.max_relative_error, 0x1p-8);
  EXPECT_GT(bf16.max_relative_error, 0.0);

  // With fraction 0.8, 4 of 5 values must clear 2^-14: the 4th largest is
  // 3e-6 in binade -19, so k = 5.
  RangeOptions options;
  options.fraction = 0.8;
  rows = StudyRange(t.view, {*FindFormat("fp16")}, options);
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ((*rows)[0].min_scale_log2, 5);

  EXPECT_THAT(StudyRange(t.view, {*FindFormat("int8")}).status().message(),
              HasSubstr("not a floating format"));
}


TEST(RealCheckpoint, EverySchemeRunsOnBothFiles) {
  for (const std::string file : {"stories260K.f32.safetensors", "stories260K.bf16.safetensors"}) {
    absl::StatusOr<TensorSet> set = TensorSet::Open(kData + file);
    ASSERT_TRUE(set.ok()) << set.status();
    for (const SchemeFamily& family : SchemeFamilies()) {
      for (const std::string& name : family.examples) {
        SCOPED_TRACE(file + " " + name);
        const auto scheme = Make(name);
        QuantReport all;
        for (const TensorView& t : set->tensors()) {
          absl::StatusOr<QuantReport> r = MeasureTensor(t, *scheme);
          ASSERT_TRUE(r.ok()) << r.status();
          all.Add(*r);
        }
        EXPECT_EQ(all.elements, 292800u);
        EXPECT_EQ(all.stats.measured, 292800u);  // no NaN, Inf or overflow in these weights
        // Every scheme is closer to x than zero is. The weakest is the unscaled
        // fp4 cast (4.3 dB): its smallest nonzero value, 0.5, is 2.5 standard
        // deviations of these weights, so most of them flush to zero.
        EXPECT_GT(all.sqnr_db(), 3.0);
        EXPECT_GT(all.cosine(), 0.8);
      }
    }
  }
}

TEST(RealCheckpoint, CastErrorsMatchIndependentRoundings) {
  absl::StatusOr<TensorSet> f32 = TensorSet::Open(kData + "stories260K.f32.safetensors");
  absl::StatusOr<TensorSet> bf16 = TensorSet::Open(kData + "stories260K.bf16.safetensors");
  ASSERT_TRUE(f32.ok() && bf16.ok());
  ASSERT_EQ(f32->tensors().size(), bf16->tensors().size());
  const auto bf16_cast = Make("bf16");
  const auto fp16_cast = Make("fp16");
  for (size_t i = 0; i < f32->tensors().size(); ++i) {
    const TensorView& t = f32->tensors()[i];
    SCOPED_TRACE(t.name);
    std::vector<float> x(t.elements()), y(t.elements());
    ASSERT_TRUE(ReadAsFloat32(t, 0, x).ok());
    ASSERT_TRUE(ReadAsFloat32(bf16->tensors()[i], 0, y).ok());
    // bf16: the second file was rounded by another tool (see PROVENANCE.md).
    // fp16: the compiler's own float -> _Float16 conversion.
    double bf16_sse = 0, bf16_max = 0;
    [[maybe_unused]] double fp16_sse = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      const double e = double{y[k]} - x[k];
      bf16_sse += e * e;
      bf16_max = std::max(bf16_max, std::fabs(e));
#ifdef __FLT16_MAX__  // g++ 12; clang 14 has _Float16 on x86 only with AVX512-FP16
      const double h = double{static_cast<float>(static_cast<_Float16>(x[k]))} - x[k];
      fp16_sse += h * h;
#endif
    }
    absl::StatusOr<QuantReport> b = MeasureTensor(t, *bf16_cast);
    absl::StatusOr<QuantReport> h = MeasureTensor(t, *fp16_cast);
    ASSERT_TRUE(b.ok() && h.ok());
    // Within the bound of kernels/error_stats.h (float sums over runs of 16).
    EXPECT_NEAR(b->stats.sum_squared_error, bf16_sse, 21 * 0x1p-24 * bf16_sse);
    EXPECT_EQ(b->max_abs_error(), bf16_max);
#ifdef __FLT16_MAX__
    EXPECT_NEAR(h->stats.sum_squared_error, fp16_sse, 21 * 0x1p-24 * fp16_sse);
#endif
  }
}

}  // namespace
}  // namespace lowp
