// The files an operation reads, so that nothing it writes replaces one.
//
// An operation is an InputScope's lifetime: while one is open, every file
// opened for reading through io/ (OpenRegularFile: MappedFile,
// ReadRegularFile and the readers built on them) is noted by device and
// inode, with the name it was opened by; OutputFile refuses a target that is
// a noted file, whatever name reaches it (a symbolic or hard link, "./x"),
// both when it is created and when it is committed (an input read after the
// output was opened is caught then, before anything is replaced). When the
// outermost open scope ends, the notes are dropped, so a file read by one
// operation may be written by the next.
//
// Who opens one: the command line for the whole run (cli/main.cc), the
// Python module for each call, and every api/ function that writes a file
// (so that a C++ caller of api/ is protected without doing anything).
// Outside any scope nothing is noted and nothing refused: a program that
// uses io/ directly decides what its operations are.
#ifndef LOWP_IO_INPUT_FILES_H_
#define LOWP_IO_INPUT_FILES_H_

#include <sys/types.h>

#include <optional>
#include <string>

namespace lowp {

// Notes that the file (device `dev`, inode `ino`) was opened for reading by
// the name `path`.
void NoteInput(dev_t dev, ino_t ino, const std::string& path);

// The name a noted file was read by; nullopt when it was not read.
std::optional<std::string> InputReadAs(dev_t dev, ino_t ino);

class InputScope {
 public:
  InputScope();
  ~InputScope();
  InputScope(const InputScope&) = delete;
  InputScope& operator=(const InputScope&) = delete;
};

}  // namespace lowp

#endif  // LOWP_IO_INPUT_FILES_H_
