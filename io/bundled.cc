#include "io/bundled.h"

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace lowp {

absl::StatusOr<std::string> BundledCheckpoint() {
  constexpr char kFile[] = "stories260K.f32.safetensors";
  std::vector<std::string> places;
  if (const char* dir = std::getenv("LOWP_DATA_DIR"); dir != nullptr && *dir != '\0') {
    places.push_back(absl::StrCat(dir, "/", kFile));
  } else {
    places.push_back(absl::StrCat(LOWP_INSTALLED_DATA_DIR, "/", kFile));
    places.push_back(absl::StrCat(LOWP_SOURCE_DATA_DIR, "/", kFile));
  }
  for (const std::string& path : places) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) return path;
  }
  return absl::NotFoundError(absl::StrCat("the bundled checkpoint is in none of ",
                                          absl::StrJoin(places, ", "),
                                          " (set LOWP_DATA_DIR or give `tensors`)"));
}

namespace {

absl::StatusOr<std::string> BundledDirectory(absl::string_view name) {
  std::vector<std::string> places;
  if (const char* dir = std::getenv("LOWP_DATA_DIR"); dir != nullptr && *dir != '\0') {
    places.push_back(absl::StrCat(dir, "/", name));
    places.push_back(absl::StrCat(dir, "/../", name));
  } else {
    places.push_back(absl::StrCat(LOWP_INSTALLED_DATA_DIR, "/", name));
    places.push_back(absl::StrCat(LOWP_SOURCE_DATA_DIR, "/../", name));
  }
  for (const std::string& path : places) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(path + "/config.json", ec)) {
      return std::filesystem::path(path).lexically_normal().string();
    }
  }
  return absl::NotFoundError(absl::StrCat("the bundled model is in none of ",
                                          absl::StrJoin(places, ", "),
                                          " (set LOWP_DATA_DIR or give `model`)"));
}

}  // namespace

absl::StatusOr<std::string> BundledModel() { return BundledDirectory("stories260K-hf"); }

absl::StatusOr<std::string> BundledMixModel() { return BundledDirectory("stories3M-hf"); }

absl::StatusOr<std::string> BundledCalibrationText() {
  constexpr char kFile[] = "tinystories-calib.txt";
  std::vector<std::string> places;
  if (const char* dir = std::getenv("LOWP_DATA_DIR"); dir != nullptr && *dir != '\0') {
    places.push_back(absl::StrCat(dir, "/text/", kFile));
    places.push_back(absl::StrCat(dir, "/../text/", kFile));
  } else {
    places.push_back(absl::StrCat(LOWP_INSTALLED_DATA_DIR, "/text/", kFile));
    places.push_back(absl::StrCat(LOWP_SOURCE_DATA_DIR, "/../text/", kFile));
  }
  for (const std::string& path : places) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(path, ec)) {
      return std::filesystem::path(path).lexically_normal().string();
    }
  }
  return absl::NotFoundError(absl::StrCat("the bundled calibration text is in none of ",
                                          absl::StrJoin(places, ", "),
                                          " (set LOWP_DATA_DIR or give `calib_text`)"));
}

}  // namespace lowp
