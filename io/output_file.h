// The one way lowp writes a file: whole or not at all.
//
// A regular file (new or existing, also through a symbolic link) is written
// to a temporary beside its target, `TARGET.lowp-XXXXXX`, created with mode
// 0666 & ~umask (an existing target's mode and, for root, owner are kept),
// fsynced, renamed over the target and the directory fsynced: a reader sees
// the old file or the new one, never part of one. On any error, on
// destruction without Commit(), and (in a program that called
// RemoveOutputsOnSignals) on SIGINT, SIGTERM or SIGHUP, the temporary is
// removed and an existing target is left untouched.
//
// An existing target that is a character or block device or a FIFO is
// written in place (so /dev/null and /dev/stdout work, and /dev/full says
// "No space left on device"); it is never replaced by a regular file. A
// directory is an error.
#ifndef LOWP_IO_OUTPUT_FILE_H_
#define LOWP_IO_OUTPUT_FILE_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace lowp {

class OutputFile {
 public:
  // Errors name the path ("output PATH: ..." unless `what` says otherwise).
  static absl::StatusOr<std::unique_ptr<OutputFile>> Create(const std::string& path,
                                                            absl::string_view what = "output");
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  absl::Status Write(std::span<const uint8_t> bytes);
  absl::Status Write(absl::string_view text);
  // Everything written reaches the target; after this, Write fails.
  absl::Status Commit();

  const std::string& path() const { return path_; }

 private:
  OutputFile() = default;
  absl::Status Error(absl::string_view what, int error);
  absl::Status Flush();
  void Discard();

  std::string path_;    // as given, for messages
  std::string what_;
  std::string target_;  // the file renamed over (the link's target)
  std::string temp_;    // empty when written in place
  int fd_ = -1;
  int slot_ = -1;       // in the signal handler's table of temporaries
  bool failed_ = false;
  std::vector<uint8_t> buffer_;
};

// A new directory written whole or not at all (a Hugging Face model: config,
// weights, tokenizer files): its files are written into a temporary
// directory beside the target, `TARGET.lowp-XXXXXX`, renamed into place by
// Commit. The target must not exist or be an empty directory (what rename
// can replace); on any error, on destruction without Commit() and on the
// signals RemoveOutputsOnSignals takes, the temporary and every file Add
// named in it are removed.
class OutputDirectory {
 public:
  static absl::StatusOr<std::unique_ptr<OutputDirectory>> Create(const std::string& path,
                                                                 absl::string_view what = "output");
  ~OutputDirectory();
  OutputDirectory(const OutputDirectory&) = delete;
  OutputDirectory& operator=(const OutputDirectory&) = delete;

  // The path of file `name` (no slash) in the temporary directory, to write
  // with OutputFile or SafetensorsWriter; Commit fails unless it was
  // written.
  std::string Add(const std::string& name);
  // Every added file is there: the directory takes the target's place.
  absl::Status Commit();

  const std::string& path() const { return path_; }

 private:
  OutputDirectory() = default;
  void Discard();

  std::string path_, what_, target_;
  std::string temp_;  // empty once committed or discarded
  std::vector<std::string> files_;
  std::vector<int> slots_;  // in the signal handler's table
};

// For programs: on SIGINT, SIGTERM and SIGHUP remove every OutputFile's
// temporary and exit with status 128 + the signal's number. A library never
// takes these signals by itself (Python, for one, has its own handlers).
void RemoveOutputsOnSignals();

}  // namespace lowp

#endif  // LOWP_IO_OUTPUT_FILE_H_
