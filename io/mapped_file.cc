#include "io/mapped_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <span>

#include "absl/strings/str_cat.h"
#include "io/input_files.h"

namespace lowp {
namespace {

absl::Status ErrnoError(int error, const std::string& path, absl::string_view what) {
  return absl::Status(absl::ErrnoToStatusCode(error),
                      absl::StrCat(path, ": ", what, ": ", std::strerror(error)));
}

// The SIGBUS guard: a fixed table of live mappings that the handler reads
// without locks (a handler may take none), each [begin, end) rounded out to
// whole pages, begin 0 for a free slot.
struct Slot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> faulted{false};
};
constexpr int kSlots = 4096;
Slot slots[kSlots];
std::mutex slots_mutex;  // serialises claiming and freeing (not the handler)
struct sigaction previous_sigbus;
uintptr_t page_size = 4096;

void PassOn(int sig, siginfo_t* info, void* context) {
  const struct sigaction& p = previous_sigbus;
  if ((p.sa_flags & SA_SIGINFO) != 0 && p.sa_sigaction != nullptr) {
    p.sa_sigaction(sig, info, context);
  } else if ((p.sa_flags & SA_SIGINFO) == 0 && p.sa_handler != SIG_DFL && p.sa_handler != SIG_IGN) {
    p.sa_handler(sig);
  } else {
    // The default action: the process ends with SIGBUS, as without lowp
    // (once the handler returns, the signal raised here is delivered; a
    // faulting instruction would also fault again). An ignored SIGBUS would
    // fault for ever, so it is treated as the default too.
    signal(SIGBUS, SIG_DFL);
    raise(sig);
  }
}

void OnSigbus(int sig, siginfo_t* info, void* context) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& slot : info->si_code > 0 ? slots : std::span<Slot>()) {  // the kernel's faults only
    const uintptr_t begin = slot.begin.load(std::memory_order_acquire);
    if (begin == 0 || address < begin) continue;
    const uintptr_t end = slot.end.load(std::memory_order_acquire);
    if (address >= end) continue;
    // The file ends before this page: the rest of the mapping reads as
    // zeros from here on, and the file is marked so no result uses them.
    const uintptr_t page = address / page_size * page_size;
    const int saved = errno;
    void* zeros = mmap(reinterpret_cast<void*>(page), end - page, PROT_READ,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    errno = saved;
    if (zeros == MAP_FAILED) break;
    slot.faulted.store(true, std::memory_order_release);
    return;
  }
  PassOn(sig, info, context);
}

void InstallSigbusGuard() {
  static std::once_flag once;
  std::call_once(once, [] {
    page_size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_sigaction = OnSigbus;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &previous_sigbus);
  });
}

// A free slot for [begin, end), or -1 when the table is full (the mapping
// then works unguarded: a shrinking file would end the process).
int ClaimSlot(uintptr_t begin, uintptr_t end) {
  InstallSigbusGuard();
  std::lock_guard<std::mutex> lock(slots_mutex);
  for (int i = 0; i < kSlots; ++i) {
    if (slots[i].begin.load(std::memory_order_relaxed) != 0) continue;
    slots[i].faulted.store(false, std::memory_order_relaxed);
    slots[i].end.store(end, std::memory_order_release);
    slots[i].begin.store(begin, std::memory_order_release);
    return i;
  }
  return -1;
}

void FreeSlot(int i) {
  std::lock_guard<std::mutex> lock(slots_mutex);
  slots[i].begin.store(0, std::memory_order_release);
  slots[i].end.store(0, std::memory_order_release);
}

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

}  // namespace

std::string FileKindName(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return "a regular file";
    case S_IFDIR:
      return "a directory";
    case S_IFIFO:
      return "a named pipe (FIFO)";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    case S_IFSOCK:
      return "a socket";
    case S_IFLNK:
      return "a symbolic link";
  }
  return "not a regular file";
}

absl::StatusOr<RegularFile> OpenRegularFile(const std::string& path, absl::string_view what) {
  const std::string name = what.empty() ? path : absl::StrCat(what, " ", path);
  if (path.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what.empty() ? "path" : what, " \"",
                                                   path.substr(0, path.find('\0')),
                                                   "\\0...\": a file name cannot hold a NUL byte"));
  }
  if (path.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what.empty() ? "path" : what, ": empty name"));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return ErrnoError(errno, name, "cannot open");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int error = errno;
    ::close(fd);
    return ErrnoError(error, name, "cannot stat");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": is ", FileKindName(st.st_mode), ", not a regular file"));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  NoteInput(st.st_dev, st.st_ino, path);
  return RegularFile{fd, static_cast<uint64_t>(st.st_size)};
}

absl::StatusOr<size_t> ReadUpTo(int fd, char* data, size_t size, const std::string& path) {
  size_t got = 0;
  while (got < size) {
    const ssize_t n = ::read(fd, data + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno, path, "cannot read");
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  return got;
}

absl::StatusOr<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes) {
  absl::StatusOr<RegularFile> file = OpenRegularFile(path);
  if (!file.ok()) return file.status();
  if (file->size > max_bytes) {
    ::close(file->fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", file->size, " bytes, above the limit of ", max_bytes));
  }
  std::string text(static_cast<size_t>(file->size), '\0');
  absl::StatusOr<size_t> got = ReadUpTo(file->fd, text.data(), text.size(), path);
  ::close(file->fd);
  if (!got.ok()) return got.status();
  if (*got != text.size()) {
    return absl::DataLossError(
        absl::StrCat(path, ": shrank from ", file->size, " to ", *got, " bytes while being read"));
  }
  return text;
}

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  absl::StatusOr<RegularFile> opened = OpenRegularFile(path);
  if (!opened.ok()) return opened.status();
  std::unique_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->fd_ = opened->fd;
  file->size_ = static_cast<size_t>(opened->size);
  struct stat st;
  if (::fstat(file->fd_, &st) != 0) return ErrnoError(errno, path, "cannot stat");
  file->mtime_ns_ = MtimeNs(st);
  if (file->size_ > 0) {
    void* data = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, file->fd_, 0);
    if (data == MAP_FAILED) return ErrnoError(errno, path, "cannot map");
    file->data_ = static_cast<const uint8_t*>(data);
    const uintptr_t begin = reinterpret_cast<uintptr_t>(data);
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    file->slot_ = ClaimSlot(begin, (begin + file->size_ + page - 1) / page * page);
  }
  return file;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  if (slot_ >= 0) FreeSlot(slot_);
  if (fd_ >= 0) ::close(fd_);
}

absl::Status MappedFile::CheckIntact() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return ErrnoError(errno, path_, "cannot stat");
  const uint64_t now = static_cast<uint64_t>(st.st_size);
  if (now < size_) {
    return absl::DataLossError(
        absl::StrCat(path_, ": shrank from ", size_, " to ", now, " bytes while being read"));
  }
  if (slot_ >= 0 && slots[slot_].faulted.load(std::memory_order_acquire)) {
    return absl::DataLossError(
        absl::StrCat(path_, ": was truncated while being read (it is ", now, " bytes again)"));
  }
  if (MtimeNs(st) != mtime_ns_) {
    return absl::DataLossError(absl::StrCat(path_, ": was modified while being read"));
  }
  return absl::OkStatus();
}

bool MappedFile::Contains(std::span<const uint8_t> range) const {
  if (data_ == nullptr || range.empty()) return false;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(range.data());
  const uintptr_t base = reinterpret_cast<uintptr_t>(data_);
  return begin >= base && begin - base <= size_ && range.size() <= size_ - (begin - base);
}

void MappedFile::Release(std::span<const uint8_t> range, bool keep_cached) const {
  // A small file's pages cost little resident, and giving them back after
  // every tensor read did not: the TLB shootdowns of madvise were half the
  // CPU time of `lowp eval` on the bundled 1 MB model (issue 29).
  if (size_ <= kKeepResidentBelow || !Contains(range)) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t base = reinterpret_cast<uintptr_t>(data_);
  const uintptr_t map_end = (base + size_ + page - 1) / page * page;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(range.data()) / page * page;
  const uintptr_t end = std::min(
      map_end, (reinterpret_cast<uintptr_t>(range.data()) + range.size() + page - 1) / page * page);
  if (end <= begin) return;
  // A fault maps more than the page it touches: the surrounding pages of the
  // page cache (fault-around), a whole large folio on recent kernels (up to
  // 2 MiB, measured on 6.18: one byte read mapped 1 MiB). Reading the next
  // range can so map again the tail of a range released before, and it
  // would stay: the unmapping reaches kFaultReach either side, which drops
  // those (pages still to be read are mapped again when read).
  constexpr uintptr_t kFaultReach = uintptr_t{2} << 20;
  const uintptr_t unmap_begin = begin - std::min(begin - base, kFaultReach);
  const uintptr_t unmap_end = std::min(map_end, end + kFaultReach);
  ::madvise(reinterpret_cast<void*>(unmap_begin), unmap_end - unmap_begin, MADV_DONTNEED);
  if (keep_cached) return;
  // And out of the page cache, so that a file larger than it is read from
  // storage once, not evicting everything else on the way.
  ::posix_fadvise(fd_, static_cast<off_t>(begin - base), static_cast<off_t>(end - begin),
                  POSIX_FADV_DONTNEED);
}

}  // namespace lowp
