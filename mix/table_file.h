// The sensitivity sweep cut into shards: `lowp mix --shard I/N --table-out F`
// measures a deterministic 1/N of the units (mix/sensitivity.h: every N-th
// of the groups x types list from the I-th, or of the groups for a
// prediction) and writes their entries to F; `--tables F1,F2,...` reads all
// N shards back into the table, which then allocates and verifies as if
// measured in one run (each candidate's KL and each group's weight errors
// do not depend on which others ran beside them, and the probe type follows
// from the types and the groups, so the merged table is bit-identical).
//
// A shard file is JSON: what makes its numbers comparable (the model's
// shape and groups, the types, the sensitivity method, the tuning tokens'
// fingerprint, the importance matrix's and the calibration tokens'), the
// shard, and its entries: each KL, whether it was measured end to end, and
// the weight error a prediction scaled it by (doubles, written to round
// trip exactly).
#ifndef LOWP_MIX_TABLE_FILE_H_
#define LOWP_MIX_TABLE_FILE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mix/sensitivity.h"
#include "mix/table.h"

namespace lowp {

struct MixShard {
  int64_t index = 1;  // from 1
  int64_t count = 1;
  // Whether unit k of the sweep (mix/sensitivity.h) is this shard's.
  bool Takes(int64_t k) const { return k % count == index - 1; }
};
// "I/N" with 1 <= I <= N <= 4096; InvalidArgument naming "shard" otherwise.
absl::StatusOr<MixShard> ParseMixShard(absl::string_view text);

// Writes the shard's measured KLs of `table` (measured on `tune`) to `path`
// (whole or not at all).
absl::Status WriteMixShard(const MixTable& table, const MixTokens& tune, const MixShard& shard,
                           const std::string& path);

// Fills `table`'s sensitivity from the shard files at `paths`, which must
// be the N shards of one sweep of this table on `tune`, each once:
// InvalidArgument naming the file and the field that differs (model,
// groups, types, sensitivity, tokens, imatrix, calibration, shard), a
// missing or repeated shard, or a malformed file.
absl::Status ReadMixShards(const std::vector<std::string>& paths, const MixTokens& tune,
                           MixTable& table);
// The same from (name, text) pairs already read.
absl::Status MergeMixShards(const std::vector<std::pair<std::string, std::string>>& files,
                            const MixTokens& tune, MixTable& table);

}  // namespace lowp

#endif  // LOWP_MIX_TABLE_FILE_H_
