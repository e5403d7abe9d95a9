#pragma once
// Reads the same small files poll after poll with one pread(2) each: a file
// is opened once and kept open, as sysfs attributes can be (each read at
// offset 0 asks the driver again).
//
// A kept descriptor is trusted while its directory is unchanged. Each
// directory read from is watched with inotify (creations, removals and
// renames in it, which is how the lab and fixture trees replace a file);
// BeginPoll() drains the pending events, usually with one read(2) that finds
// none, and a directory with events has its files opened again and its
// listing read again. sysfs attributes change in place, without events, so
// on a real host a poll is one pread per counter. Where a directory cannot
// be watched (inotify unavailable or out of watches), it is checked with one
// stat(2) per poll instead: its mtime or inode changing stands for an event,
// and a directory changed less than 100 ms before the check (within a
// timestamp tick) is opened afresh at every check until it settles.
//
// Everything is closed and rediscovered every `rediscover_us` in any case
// (sysfs sends no events for hot-plugged devices), and a descriptor whose
// read fails with ENODEV or ENOENT (a removed device) is dropped.
//
// When the process runs out of descriptors (EMFILE), files are read and
// closed as FsRoot does; nothing is lost. One thread at a time.

#include <sys/types.h>

#include <cstdint>
#include <ctime>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "common/fs_root.h"
#include "common/strings.h"

namespace rocefab {

class FileCache final {
 public:
  // `watch` false checks every directory with stat(2), as when inotify is
  // unavailable.
  explicit FileCache(const FsRoot& root, int64_t rediscover_us = 30'000'000, bool watch = true);
  ~FileCache();
  FileCache(const FileCache&) = delete;
  FileCache& operator=(const FileCache&) = delete;

  // Starts a poll at `now_us`: each directory is checked again on first use.
  void BeginPoll(int64_t now_us);
  // As FsRoot::ReadFile and FsRoot::ListDir, with the same errors.
  absl::StatusOr<std::string> ReadFile(std::string_view relative);
  // The file `name` of directory `dir` (relative to the root): the same
  // read, without building the file's path.
  absl::StatusOr<std::string> ReadFileIn(std::string_view dir, std::string_view name);
  absl::StatusOr<std::vector<std::string>> ListDir(std::string_view relative);

  size_t open_files() const { return open_files_; }
  // Directories found changed since their files were opened.
  uint64_t changed_dirs() const { return changed_dirs_; }
  // Directories watched with inotify (the others are checked with stat).
  size_t watched_dirs() const { return by_watch_.size(); }

 private:
  struct File {
    int fd = -1;
    int open_errno = 0;  // remembered while the directory is unchanged
  };
  struct Dir {
    std::string path;          // absolute
    int watch = -1;            // inotify watch; -1: checked with stat; -2: could not watch
    uint64_t checked_poll = 0;
    int stat_errno = 0;        // 0: the directory exists
    timespec mtime{};
    bool settled = false;      // the mtime was older than a timestamp tick when seen
    ino_t ino = 0;
    dev_t dev = 0;
    StringMap<File> files;  // looked up by std::string_view
    std::optional<std::vector<std::string>> listing;
  };
  // `relative` without leading or trailing '/'.
  Dir& Check(std::string_view relative);
  void Forget(Dir* dir);
  void CloseAll();
  void DrainEvents();

  const FsRoot& root_;
  const int64_t rediscover_us_;
  const bool watch_;
  int inotify_ = -1;
  int64_t discovered_us_ = 0;
  uint64_t poll_ = 1;
  size_t open_files_ = 0;
  uint64_t changed_dirs_ = 0;
  StringMap<Dir> dirs_;  // by relative path
  std::unordered_map<int, std::vector<Dir*>> by_watch_;  // two paths may be one directory
};

}  // namespace rocefab
