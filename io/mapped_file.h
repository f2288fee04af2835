// Reading files lowp did not write: regular files only (a FIFO, a device or
// a directory is refused before anything can block on it), mapped read-only,
// and safe against a file that shrinks while it is read.
//
// A read through a mapping past the end of a file that was truncated after
// it was mapped raises SIGBUS. MappedFile installs, once per process, a SIGBUS
// handler that recognises faults inside any live mapping, maps zero pages over
// the rest of that mapping so the read completes, and marks the file; every
// other SIGBUS goes to the handler that was there before (or kills the
// process as by default). A caller learns of it from CheckIntact(), which
// must be asked before anything read from the mapping is reported or
// written out: the zeros are never a result.
#ifndef LOWP_IO_MAPPED_FILE_H_
#define LOWP_IO_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lowp {

// An open regular file: its descriptor (the caller closes it) and its size
// when opened.
struct RegularFile {
  int fd = -1;
  uint64_t size = 0;
};

// Opens `path` for reading without blocking (O_NONBLOCK, so a FIFO with no
// writer cannot hang the open) and keeps it only if it is a regular file;
// otherwise InvalidArgument naming the path and what it is ("a named pipe
// (FIFO)", "a character device", "a directory", ...), or the system's reason
// it cannot be opened. `what` begins the message ("input"; may be empty).
absl::StatusOr<RegularFile> OpenRegularFile(const std::string& path, absl::string_view what = "");

// Reads up to `size` bytes into `data`, fewer only at the end of the file;
// errors name `path`.
absl::StatusOr<size_t> ReadUpTo(int fd, char* data, size_t size, const std::string& path);

// A regular file's whole contents, at most `max_bytes`: larger files are
// InvalidArgument naming the limit; a file that changes size while read is
// DataLoss. Errors name the path.
absl::StatusOr<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes);

// What a file descriptor or path is, for messages: "a regular file", "a
// directory", "a named pipe (FIFO)", "a character device", "a block
// device", "a socket", "a symbolic link".
std::string FileKindName(unsigned mode);

// A whole regular file mapped read-only (an empty file maps to an empty span).
class MappedFile {
 public:
  // Errors name the path and the system's reason (errno text).
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  // True if `range` lies inside this mapping.
  bool Contains(std::span<const uint8_t> range) const;
  // madvise(MADV_DONTNEED) and posix_fadvise(POSIX_FADV_DONTNEED) over the
  // pages `range` touches (rounded out to whole pages, clipped to the
  // mapping; the madvise 2 MiB further either side, for the pages a fault
  // maps around the one it touches): the memory is returned, the pages leave
  // the page cache, and the data is read from storage again if used later.
  // Ranges outside the mapping are ignored. With `keep_cached`, only madvise:
  // the pages stay in the page cache. Nothing for a file of
  // kKeepResidentBelow bytes or less: it stays mapped whole (its pages are
  // worth less than the system calls).
  void Release(std::span<const uint8_t> range, bool keep_cached = false) const;
  static constexpr size_t kKeepResidentBelow = size_t{64} << 20;
  // OK while the file still has the size and modification time it had when
  // mapped and no read ran past its end; DataLoss naming the file otherwise
  // ("shrank from N to M bytes while being read", "was modified while being
  // read"). Whatever was read from the mapping since it was opened is then
  // not to be trusted.
  absl::Status CheckIntact() const;

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int fd_ = -1;           // kept open to ask the file's size again
  int64_t mtime_ns_ = 0;  // its modification time when mapped
  int slot_ = -1;         // in the SIGBUS handler's table; -1 when not guarded
};

}  // namespace lowp

#endif  // LOWP_IO_MAPPED_FILE_H_
