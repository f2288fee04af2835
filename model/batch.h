// A batch of token sequences run through the forward pass together: which
// rows of the hidden state ([rows, hidden_size], sequence after sequence)
// belong to which sequence and at which positions, and how the rows group
// into matrix products.
//
// A sequence's results depend only on its own tokens and on the products its
// rows took part in. So that they never depend on how a run is cut into
// batches or how many threads it has, products group whole consecutive
// sequences of the run (GroupSequences: at least kGroupRows rows a group,
// where sequences are that short) and split a group into blocks of at most
// kBlockRows rows from its start; a run's batches are whole groups.
#ifndef LOWP_MODEL_BATCH_H_
#define LOWP_MODEL_BATCH_H_

#include <cstdint>
#include <span>
#include <vector>

#include "model/gemm.h"

namespace lowp {

// OpenBLAS's sgemm reaches its full rate from about 256 rows (on 128 rows it
// packs the weight for half the work): short sequences are multiplied
// together up to this many rows.
constexpr int64_t kGroupRows = 256;
// Row blocks of a group: the most rows one product call takes.
constexpr int64_t kBlockRows = 512;

struct SequenceRows {
  int64_t first_row = 0;       // in the batch's hidden state
  int64_t rows = 0;            // tokens run in this batch
  int64_t first_position = 0;  // the position of its first token (its cache's length)
};

struct Batch {
  std::vector<SequenceRows> sequences;
  std::vector<RowBlock> blocks;  // every row in exactly one, in order
  int64_t rows = 0;

  // Sequences of `lengths` tokens starting at `positions` (empty: all at
  // 0), laid out in order, grouped as GroupSequences groups them: the batch
  // must be whole groups of its run for results not to depend on batching.
  static Batch Make(std::span<const int64_t> lengths, std::span<const int64_t> positions = {},
                    int64_t group_rows = kGroupRows);

  // The batch's groups as batches of their own (rows relative to each):
  // independent work, for small models whose products are too little to
  // split (RunLayerTasks, model/forward.h).
  std::vector<Batch> Groups() const;
  // Where each group of Groups() starts: its first sequence.
  std::vector<int64_t> group_starts;
};

// The first sequence of each group of a run of sequences of `lengths`
// tokens: consecutive sequences until a group holds `group_rows` rows (the
// last group may hold fewer). Always starts with 0.
std::vector<int64_t> GroupSequences(std::span<const int64_t> lengths,
                                    int64_t group_rows = kGroupRows);

}  // namespace lowp

#endif  // LOWP_MODEL_BATCH_H_
