// libFuzzer target: ReadImatrix (io/imatrix.h) over arbitrary files, both
// formats (GGUF when the bytes begin "GGUF", llama.cpp's legacy .dat
// otherwise). The input is written to a scratch file and read through the
// path, as lowp reads one. Whatever fails must be InvalidArgument naming the
// file, and agree with ParseImatrix over the same bytes. Whatever loads: every
// entry valid, its importance computable for each matrix and finite; written
// back as GGUF it reads back bit for bit; written as .dat (when the format can
// hold it) it reads back with every importance value within one ulp.
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "io/imatrix.h"
#include "tests/fuzz/fuzz_check.h"

namespace lowp::fuzz {
namespace {

// One directory per process for the files read and written.
const std::string& ScratchDir() {
  static const std::string dir = [] {
    char name[] = "/tmp/lowp-imatrix-fuzz-XXXXXX";
    const char* made = mkdtemp(name);
    return std::string(made != nullptr ? made : "/tmp");
  }();
  return dir;
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Distance in ulps between two non-negative finite floats.
uint32_t UlpDistance(float a, float b) {
  const uint32_t x = std::bit_cast<uint32_t>(a);
  const uint32_t y = std::bit_cast<uint32_t>(b);
  return x > y ? x - y : y - x;
}

void CheckLoaded(const Imatrix& im, std::span<const uint8_t> file) {
  const bool gguf = file.size() >= 4 && std::memcmp(file.data(), "GGUF", 4) == 0;
  Check(im.format == (gguf ? ImatrixFormat::kGguf : ImatrixFormat::kLegacyDat),
        "format disagrees with the magic");
  Check(!im.entries().empty(), "a loaded imatrix without entries");
  Check(im.chunk_size > 0, "chunk size 0");
  uint64_t values = 0;
  for (const auto& [name, e] : im.entries()) {
    Check(name == e.name, "entry keyed by another name");
    Check(ValidateImatrixEntry(e, "fuzz").ok(), "a loaded entry fails validation");
    Check(im.Find(name) == &e && im.FindExact(name) == &e, "an entry is not found by its name");
    values += e.sum2.size() + e.sum.size() + e.counts.size();
    const std::vector<float> all = e.Values();
    Check(all.size() == e.sum2.size(), "Values() size");
    for (float v : all) Check(std::isfinite(v) && v >= 0, "an importance value not finite or negative");
    for (int64_t m = 0; m < e.matrices && m < 4; ++m) {
      absl::StatusOr<std::vector<float>> v = im.Importance(name, m);
      Check(v.ok(), "Importance of a matrix of an entry failed");
      Check(SameBits(*v, std::vector<float>(all.begin() + m * e.columns,
                                            all.begin() + (m + 1) * e.columns)),
            "Importance disagrees with Values()");
    }
    Check(!im.Importance(name, e.matrices).ok(), "Importance past the last matrix succeeded");
    Check(im.Importance(name, e.columns * e.matrices, 1, 0).ok(),
          "Importance of the entry as one matrix failed");
  }
  // Every value came from the file (a legacy entry's one count from its
  // 12-byte header): nothing is allocated out of proportion to it.
  Check(values * sizeof(float) <= file.size(), "more values than the file holds");
}

void CheckRoundTrips(const Imatrix& im) {
  const std::string gguf = ScratchDir() + "/back.gguf";
  if (WriteImatrixGguf(im, gguf).ok()) {
    absl::StatusOr<Imatrix> back = ReadImatrix(gguf);
    Check(back.ok(), "a written GGUF imatrix does not read back");
    Check(back->datasets == im.datasets && back->chunk_count == im.chunk_count &&
              back->chunk_size == im.chunk_size,
          "GGUF metadata changed in a round trip");
    Check(back->entries().size() == im.entries().size(), "entries lost in a GGUF round trip");
    for (const auto& [name, e] : im.entries()) {
      const ImatrixEntry* b = back->FindExact(name);
      Check(b != nullptr && b->columns == e.columns && b->matrices == e.matrices &&
                SameBits(b->sum2, e.sum2) && SameBits(b->sum, e.sum) &&
                SameBits(b->counts, e.counts),
            "an entry changed in a GGUF round trip");
    }
  }
  const std::string dat = ScratchDir() + "/back.dat";
  if (WriteImatrixDat(im, dat).ok()) {
    absl::StatusOr<Imatrix> back = ReadImatrix(dat);
    Check(back.ok(), "a written .dat imatrix does not read back");
    Check(back->chunk_count == im.chunk_count, "chunk count changed in a .dat round trip");
    for (const auto& [name, e] : im.entries()) {
      bool any = false;
      for (float c : e.counts) any = any || c != 0;
      const ImatrixEntry* b = back->FindExact(name);
      Check((b != nullptr) == any, "the .dat has an entry without data or lacks one with");
      if (b == nullptr) continue;
      const std::vector<float> want = e.Values();
      const std::vector<float> got = b->Values();
      Check(got.size() == want.size(), "an entry changed size in a .dat round trip");
      for (size_t i = 0; i < want.size(); ++i) {
        Check(UlpDistance(got[i], want[i]) <= 1, "importance off by more than one ulp via .dat");
      }
    }
  }
}

}  // namespace

int FuzzImatrix(const uint8_t* data, size_t size) {
  const std::string name = "fuzz.imatrix";
  const std::string path = ScratchDir() + "/" + name;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  const std::span<const uint8_t> file(data, size);
  absl::StatusOr<Imatrix> read = ReadImatrix(path);
  absl::StatusOr<Imatrix> parsed = ParseImatrix(file, name);
  Check(read.ok() == parsed.ok(), "ReadImatrix and ParseImatrix disagree");
  if (!read.ok()) {
    CheckError(read.status(), name);
    CheckError(parsed.status(), name);
    Check(absl::IsInvalidArgument(read.status()), "error is not InvalidArgument");
    return 0;
  }
  CheckLoaded(*read, file);
  CheckRoundTrips(*read);
  return 0;
}

}  // namespace lowp::fuzz

#ifndef LOWP_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return lowp::fuzz::FuzzImatrix(data, size);
}
#endif
