#include "io/output_file.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>

#include "absl/strings/str_cat.h"
#include "formats/option_error.h"
#include "io/input_files.h"

namespace lowp {
namespace {

// The temporaries the signal handler removes: a fixed table it reads
// without locks, a path written before its slot is marked used.
constexpr int kTempSlots = 64;
struct TempSlot {
  std::atomic<bool> used{false};
  bool directory = false;  // removed (rmdir) after every file
  char path[PATH_MAX + 32];
};
TempSlot temp_slots[kTempSlots];
std::mutex temp_mutex;

int RegisterTemp(const std::string& path, bool directory = false) {
  if (path.size() >= sizeof(TempSlot::path)) return -1;
  std::lock_guard<std::mutex> lock(temp_mutex);
  for (int i = 0; i < kTempSlots; ++i) {
    if (temp_slots[i].used.load(std::memory_order_relaxed)) continue;
    std::memcpy(temp_slots[i].path, path.c_str(), path.size() + 1);
    temp_slots[i].directory = directory;
    temp_slots[i].used.store(true, std::memory_order_release);
    return i;
  }
  return -1;
}

void UnregisterTemp(int slot) {
  if (slot < 0) return;
  std::lock_guard<std::mutex> lock(temp_mutex);
  temp_slots[slot].used.store(false, std::memory_order_release);
}

void OnTerminatingSignal(int sig) {
  for (bool directories : {false, true}) {
    for (TempSlot& slot : temp_slots) {
      if (!slot.used.load(std::memory_order_acquire) || slot.directory != directories) continue;
      if (directories) {
        rmdir(slot.path);
      } else {
        unlink(slot.path);
      }
    }
  }
  _exit(128 + sig);
}

std::string Directory(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string RandomSuffix() {
  static constexpr char kChars[] =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  unsigned char bytes[6];
  if (getrandom(bytes, sizeof(bytes), 0) != static_cast<ssize_t>(sizeof(bytes))) {
    static std::atomic<uint64_t> counter{0};
    const uint64_t x = (static_cast<uint64_t>(getpid()) << 32) ^ counter.fetch_add(0x9E3779B9);
    for (int i = 0; i < 6; ++i) bytes[i] = static_cast<unsigned char>(x >> (8 * i));
  }
  std::string s;
  for (unsigned char b : bytes) s.push_back(kChars[b % (sizeof(kChars) - 1)]);
  return s;
}

constexpr size_t kBufferBytes = size_t{1} << 20;

}  // namespace

void RemoveOutputsOnSignals() {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = OnTerminatingSignal;
  sigfillset(&action.sa_mask);  // one handler at a time
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &action, nullptr);
}

namespace {

// OK unless the existing file `st` describes is one this process read.
absl::Status RefuseInput(const struct stat& st, const std::string& path, absl::string_view what) {
  std::optional<std::string> read_as = InputReadAs(st.st_dev, st.st_ino);
  if (!read_as) return absl::OkStatus();
  return OptionError(
      what,
      absl::StrCat(path, ": is an input of this run",
                   *read_as == path ? "" : absl::StrCat(" (as ", *read_as, ")"),
                   "; lowp never writes over a file it reads"),
      " ");
}

}  // namespace

absl::Status OutputFile::Error(absl::string_view what, int error) {
  failed_ = true;
  return absl::Status(absl::ErrnoToStatusCode(error),
                      absl::StrCat(what_, " ", path_, ": ", what, " (", std::strerror(error), ")"));
}

absl::StatusOr<std::unique_ptr<OutputFile>> OutputFile::Create(const std::string& path,
                                                               absl::string_view what) {
  std::unique_ptr<OutputFile> out(new OutputFile());
  out->path_ = path;
  out->what_ = std::string(what);
  if (path.empty() || path.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " \"", path.substr(0, path.find('\0')), "\": ",
        path.empty() ? "empty file name" : "a file name cannot hold a NUL byte"));
  }
  struct stat st;
  bool exists = ::stat(path.c_str(), &st) == 0;
  if (!exists && errno != ENOENT) return out->Error("cannot stat", errno);
  if (!exists) {
    struct stat link;
    if (::lstat(path.c_str(), &link) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " ", path, ": is a symbolic link to a file that does not exist"));
    }
  }
  if (exists && S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": is a directory"));
  }
  if (exists && !S_ISREG(st.st_mode)) {
    if (S_ISSOCK(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": is a socket"));
    }
    // A device or a FIFO: written in place, never replaced.
    out->fd_ = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (out->fd_ < 0) return out->Error("cannot open", errno);
    out->target_ = path;
    out->buffer_.reserve(kBufferBytes);
    return out;
  }
  out->target_ = path;
  if (exists) {
    if (absl::Status s = RefuseInput(st, path, what); !s.ok()) return s;
    char resolved[PATH_MAX];
    if (::realpath(path.c_str(), resolved) == nullptr) return out->Error("cannot resolve", errno);
    out->target_ = resolved;
  }
  for (int attempt = 0; attempt < 100 && out->fd_ < 0; ++attempt) {
    out->temp_ = absl::StrCat(out->target_, ".lowp-", RandomSuffix());
    // Known to the signal handler before it exists: a signal right after
    // the file appears must find it.
    out->slot_ = RegisterTemp(out->temp_);
    out->fd_ = ::open(out->temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (out->fd_ < 0) {
      const int error = errno;
      UnregisterTemp(out->slot_);
      out->slot_ = -1;
      out->temp_.clear();
      if (error != EEXIST) return out->Error("cannot create a temporary file beside it", error);
    }
  }
  if (out->fd_ < 0) return out->Error("cannot create a temporary file beside it", EEXIST);
  if (exists) {
    // Keep what the file was: its mode, and its owner where we may.
    ::fchmod(out->fd_, st.st_mode & 07777);
    if (::geteuid() == 0) (void)!::fchown(out->fd_, st.st_uid, st.st_gid);
  }
  out->buffer_.reserve(kBufferBytes);
  return out;
}

OutputFile::~OutputFile() { Discard(); }

void OutputFile::Discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
  UnregisterTemp(slot_);
  slot_ = -1;
}

absl::Status OutputFile::Flush() {
  size_t done = 0;
  while (done < buffer_.size()) {
    const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error("cannot write", errno);
    if (n == 0) return Error("cannot write", EIO);
    done += static_cast<size_t>(n);
  }
  buffer_.clear();
  return absl::OkStatus();
}

absl::Status OutputFile::Write(std::span<const uint8_t> bytes) {
  if (failed_ || fd_ < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(what_, " ", path_, ": written after it failed or was committed"));
  }
  while (!bytes.empty()) {
    const size_t n = std::min(bytes.size(), kBufferBytes - buffer_.size());
    buffer_.insert(buffer_.end(), bytes.begin(), bytes.begin() + n);
    bytes = bytes.subspan(n);
    if (buffer_.size() == kBufferBytes) {
      if (absl::Status s = Flush(); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status OutputFile::Write(absl::string_view text) {
  return Write(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()),
                                        text.size()));
}

absl::Status OutputFile::Commit() {
  if (failed_ || fd_ < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(what_, " ", path_, ": committed after it failed or was committed"));
  }
  if (absl::Status s = Flush(); !s.ok()) return s;
  if (temp_.empty()) {  // a device or FIFO, written in place
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return Error("cannot write", errno);
    return absl::OkStatus();
  }
  if (::fsync(fd_) != 0) return Error("cannot write", errno);
  // An input read since Create: refused before anything is replaced.
  if (struct stat st; ::stat(target_.c_str(), &st) == 0) {
    if (absl::Status s = RefuseInput(st, path_, what_); !s.ok()) {
      failed_ = true;
      Discard();
      return s;
    }
  }
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return Error("cannot write", errno);
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    return Error("cannot rename the temporary file into place", errno);
  }
  temp_.clear();
  UnregisterTemp(slot_);
  slot_ = -1;
  const int dir = ::open(Directory(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);  // the rename itself made durable; some file systems refuse, harmlessly
    ::close(dir);
  }
  return absl::OkStatus();
}


absl::StatusOr<std::unique_ptr<OutputDirectory>> OutputDirectory::Create(const std::string& path,
                                                                         absl::string_view what) {
  std::unique_ptr<OutputDirectory> out(new OutputDirectory());
  out->path_ = path;
  out->what_ = std::string(what);
  auto fail = [&](absl::string_view why, int error) {
    return absl::Status(absl::ErrnoToStatusCode(error),
                        absl::StrCat(what, " ", path, ": ", why, " (", std::strerror(error), ")"));
  };
  std::string target = path;
  while (target.size() > 1 && target.back() == '/') target.pop_back();
  if (target.empty() || target.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " \"", path.substr(0, path.find('\0')), "\": ",
        target.empty() ? "empty directory name" : "a name cannot hold a NUL byte"));
  }
  struct stat st;
  if (::lstat(target.c_str(), &st) == 0) {
    // Only an empty directory can be replaced whole (rename(2)).
    bool empty = S_ISDIR(st.st_mode);
    if (empty) {
      std::error_code ec;
      empty = std::filesystem::is_empty(target, ec) && !ec;
    }
    if (!empty) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, " ", path, ": exists", S_ISDIR(st.st_mode) ? " and is not empty" : "",
          "; a model directory is written new, whole or not at all"));
    }
  } else if (errno != ENOENT) {
    return fail("cannot stat", errno);
  }
  out->target_ = target;
  for (int attempt = 0; attempt < 100 && out->temp_.empty(); ++attempt) {
    std::string temp = absl::StrCat(target, ".lowp-", RandomSuffix());
    const int slot = RegisterTemp(temp, /*directory=*/true);
    if (::mkdir(temp.c_str(), 0777) == 0) {
      out->temp_ = std::move(temp);
      out->slots_.push_back(slot);
      break;
    }
    const int error = errno;
    UnregisterTemp(slot);
    if (error != EEXIST) return fail("cannot create a temporary directory beside it", error);
  }
  if (out->temp_.empty()) return fail("cannot create a temporary directory beside it", EEXIST);
  return out;
}

std::string OutputDirectory::Add(const std::string& name) {
  std::string file = absl::StrCat(temp_, "/", name);
  slots_.push_back(RegisterTemp(file));
  files_.push_back(file);
  return file;
}

void OutputDirectory::Discard() {
  if (temp_.empty()) return;
  for (const std::string& file : files_) ::unlink(file.c_str());
  ::rmdir(temp_.c_str());
  temp_.clear();
  for (int slot : slots_) UnregisterTemp(slot);
  slots_.clear();
}

OutputDirectory::~OutputDirectory() { Discard(); }

absl::Status OutputDirectory::Commit() {
  if (temp_.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(what_, " ", path_, ": committed after it failed or was committed"));
  }
  for (const std::string& file : files_) {
    struct stat st;
    if (::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      const std::string missing = file.substr(temp_.size() + 1);
      Discard();
      return absl::InternalError(absl::StrCat(what_, " ", path_, ": ", missing, " was not written"));
    }
  }
  if (int fd = ::open(temp_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
  if (::rename(temp_.c_str(), target_.c_str()) != 0) {
    const int error = errno;
    Discard();
    return absl::Status(absl::ErrnoToStatusCode(error),
                        absl::StrCat(what_, " ", path_, ": cannot rename the temporary directory "
                                     "into place (", std::strerror(error), ")"));
  }
  temp_.clear();
  for (int slot : slots_) UnregisterTemp(slot);
  slots_.clear();
  const int dir = ::open(Directory(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return absl::OkStatus();
}

}  // namespace lowp
