#pragma once
// All file-system reads of outside state (sysfs, procfs, text fixtures) go
// through an FsRoot, so a daemon can be pointed at a fixture tree exactly as
// node_exporter's --path.sysfs does. An FsRoot is immutable and thread-safe.

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace rocefab {

class FsRoot final {
 public:
  // `root` replaces "/" of the paths given to the methods below; "" or "/"
  // means the real root.
  explicit FsRoot(std::string root);

  // Joins the root and a relative path ("class/infiniband/mlx5_0").
  std::string Resolve(std::string_view relative) const;
  const std::string& root() const { return root_; }

  // Reads a whole small file. NotFound when it does not exist.
  absl::StatusOr<std::string> ReadFile(std::string_view relative) const;
  // Names of the entries of a directory, sorted, without "." and "..".
  absl::StatusOr<std::vector<std::string>> ListDir(std::string_view relative) const;
  bool Exists(std::string_view relative) const;

 private:
  std::string root_;
};

// True when `path` is a procfs mount, whose files describe the running
// kernel (a host boot id read there cannot change under the reader), as
// opposed to a tree of files standing for one.
bool IsProcfsMount(const std::string& path);

// The status of a failed file operation on `path`: NotFound ("path:
// missing") for ENOENT and ENOTDIR, Unavailable with strerror otherwise.
absl::Status PathError(std::string_view path, int err);

// Names of the entries of a directory by absolute path, sorted, without "."
// and "..".
absl::StatusOr<std::vector<std::string>> ListDirectory(const std::string& path);

// Reads a whole file by absolute path (sysfs attributes are < 4 KiB; others
// are read in chunks). NotFound when missing, Unavailable on other errors.
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// Writes `content` to `path` through a temporary file and rename(2), so a
// reader sees the old or the new content, never a mix.
absl::Status WriteFileAtomic(const std::string& path, const std::string& content);

// Removes trailing whitespace and newlines.
std::string_view TrimRight(std::string_view text);
std::string_view Trim(std::string_view text);

}  // namespace rocefab
