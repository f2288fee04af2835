#include "io/input_files.h"

#include <map>
#include <mutex>
#include <utility>

namespace lowp {
namespace {

struct Notes {
  std::mutex mutex;
  std::map<std::pair<dev_t, ino_t>, std::string> read_as;
  int scopes = 0;
};

Notes& TheNotes() {
  static Notes* notes = new Notes();  // never destroyed: readers may run at exit
  return *notes;
}

}  // namespace

void NoteInput(dev_t dev, ino_t ino, const std::string& path) {
  Notes& n = TheNotes();
  std::lock_guard<std::mutex> lock(n.mutex);
  if (n.scopes > 0) n.read_as.try_emplace({dev, ino}, path);
}

std::optional<std::string> InputReadAs(dev_t dev, ino_t ino) {
  Notes& n = TheNotes();
  std::lock_guard<std::mutex> lock(n.mutex);
  auto it = n.read_as.find({dev, ino});
  if (it == n.read_as.end()) return std::nullopt;
  return it->second;
}

InputScope::InputScope() {
  Notes& n = TheNotes();
  std::lock_guard<std::mutex> lock(n.mutex);
  ++n.scopes;
}

InputScope::~InputScope() {
  Notes& n = TheNotes();
  std::lock_guard<std::mutex> lock(n.mutex);
  if (--n.scopes == 0) n.read_as.clear();
}

}  // namespace lowp
