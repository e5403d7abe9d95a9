#include "common/file_cache.h"

#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/strings.h"

namespace rocefab {
namespace {

constexpr uint32_t kDirEvents = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                                IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;

// Longer than any file system's timestamp tick (jiffies at HZ=100 are 10 ms).
constexpr int64_t kSettledNs = 100'000'000;

// The whole content of an open file from offset 0, or an errno.
int ReadAt0(int fd, std::string* out) {
  char buf[4096];
  off_t offset = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, offset);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) break;
    out->append(buf, static_cast<size_t>(n));
    offset += n;
    // A short read is the end of a sysfs attribute or of a small file.
    if (static_cast<size_t>(n) < sizeof buf) break;
  }
  return 0;
}

}  // namespace

FileCache::FileCache(const FsRoot& root, int64_t rediscover_us, bool watch)
    : root_(root), rediscover_us_(rediscover_us), watch_(watch) {}

FileCache::~FileCache() {
  CloseAll();
  if (inotify_ >= 0) ::close(inotify_);
}

void FileCache::CloseAll() {
  for (auto& [path, dir] : dirs_) Forget(&dir);
  dirs_.clear();
  by_watch_.clear();
  // A new inotify instance drops every watch at once.
  if (inotify_ >= 0) ::close(inotify_);
  inotify_ = watch_ ? ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC) : -1;
}

void FileCache::Forget(Dir* dir) {
  if (!dir->files.empty() || dir->listing) ++changed_dirs_;
  for (auto& [name, file] : dir->files)
    if (file.fd >= 0) {
      ::close(file.fd);
      --open_files_;
    }
  dir->files.clear();
  dir->listing.reset();
}

void FileCache::BeginPoll(int64_t now_us) {
  ++poll_;
  if (discovered_us_ == 0 || now_us - discovered_us_ >= rediscover_us_ || now_us < discovered_us_) {
    const uint64_t changed = changed_dirs_;
    CloseAll();
    changed_dirs_ = changed;  // a rediscovery is not a change
    discovered_us_ = now_us;
    return;
  }
  DrainEvents();
}

void FileCache::DrainEvents() {
  if (inotify_ < 0) return;
  alignas(inotify_event) char buf[16384];
  bool overflow = false;
  std::vector<int> gone;
  for (;;) {
    const ssize_t n = ::read(inotify_, buf, sizeof buf);
    if (n <= 0) break;  // EAGAIN: nothing more
    for (ssize_t at = 0; at + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(buf + at);
      at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      if (event->mask & IN_Q_OVERFLOW) {
        overflow = true;
        continue;
      }
      auto it = by_watch_.find(event->wd);
      if (it == by_watch_.end()) continue;
      for (Dir* dir : it->second) {
        Forget(dir);
        if (event->mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)) {
          dir->watch = -1;  // gone or moved: stat it on next use
          dir->checked_poll = 0;
        }
      }
      if (event->mask & IN_IGNORED) gone.push_back(event->wd);
    }
  }
  for (int wd : gone) by_watch_.erase(wd);
  if (overflow) {
    // Events were lost: trust nothing.
    const uint64_t changed = changed_dirs_;
    CloseAll();
    changed_dirs_ = changed + 1;
  }
}

FileCache::Dir& FileCache::Check(std::string_view relative) {
  auto it = dirs_.find(relative);
  if (it == dirs_.end()) {
    it = dirs_.emplace(std::string(relative), Dir{}).first;
    it->second.path = root_.Resolve(relative);
    while (it->second.path.size() > 1 && it->second.path.back() == '/') it->second.path.pop_back();
  }
  Dir& dir = it->second;
  if (dir.checked_poll == poll_) return dir;
  dir.checked_poll = poll_;
  if (dir.watch >= 0) return dir;  // its events were drained by BeginPoll
  struct stat st {};
  if (::stat(dir.path.c_str(), &st) != 0) {
    Forget(&dir);
    dir.stat_errno = errno;
    return dir;
  }
  // File timestamps come from a coarse clock: a rename within the same tick
  // as the change last seen leaves the mtime as it was. So an mtime is
  // trusted only once it is older than any tick when it is seen; until then
  // the directory counts as changed at every check.
  if (dir.stat_errno != 0 || !dir.settled || st.st_mtim.tv_sec != dir.mtime.tv_sec ||
      st.st_mtim.tv_nsec != dir.mtime.tv_nsec || st.st_ino != dir.ino || st.st_dev != dir.dev)
    Forget(&dir);
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  const int64_t age_ns = (now.tv_sec - st.st_mtim.tv_sec) * 1'000'000'000LL + (now.tv_nsec - st.st_mtim.tv_nsec);
  dir.settled = age_ns > kSettledNs;
  dir.stat_errno = 0;
  dir.mtime = st.st_mtim;
  dir.ino = st.st_ino;
  dir.dev = st.st_dev;
  // Watched from now on. A change between the stat and the watch happened
  // before any file of it is opened below, so nothing stale is kept.
  if (dir.watch == -1 && inotify_ >= 0) {
    const int wd = ::inotify_add_watch(inotify_, dir.path.c_str(), kDirEvents);
    if (wd >= 0) {
      dir.watch = wd;
      by_watch_[wd].push_back(&dir);
    } else {
      dir.watch = -2;  // out of watches: stat it each poll until rediscovery
    }
  }
  return dir;
}

namespace {
std::string_view StripSlashes(std::string_view path) {
  while (!path.empty() && path.front() == '/') path.remove_prefix(1);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  return path;
}
}  // namespace

absl::StatusOr<std::string> FileCache::ReadFile(std::string_view relative) {
  relative = StripSlashes(relative);
  const size_t slash = relative.rfind('/');
  if (slash == std::string_view::npos) return ReadFileIn("", relative);
  return ReadFileIn(relative.substr(0, slash), relative.substr(slash + 1));
}

absl::StatusOr<std::string> FileCache::ReadFileIn(std::string_view dir_relative, std::string_view name) {
  if (name.empty()) return root_.ReadFile(dir_relative);
  Dir& dir = Check(StripSlashes(dir_relative));
  if (dir.stat_errno != 0) return PathError(StrCat(dir.path, "/", name), dir.stat_errno);
  auto it = dir.files.find(name);
  if (it == dir.files.end()) {
    const std::string path = StrCat(dir.path, "/", name);
    File file;
    file.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (file.fd >= 0) {
      ++open_files_;
    } else if (errno == EMFILE || errno == ENFILE) {
      return ReadWholeFile(path);  // out of descriptors: read and close
    } else {
      file.open_errno = errno;
    }
    it = dir.files.emplace(std::string(name), file).first;
  }
  if (it->second.fd < 0) return PathError(StrCat(dir.path, "/", name), it->second.open_errno);
  std::string out;
  if (const int err = ReadAt0(it->second.fd, &out); err != 0) {
    const std::string path = StrCat(dir.path, "/", name);
    if (err == ENODEV || err == ENOENT || err == ESTALE) {
      // The device went away: look again next poll.
      Forget(&dir);
      dir.checked_poll = 0;
      return absl::NotFoundError(StrCat(path, ": missing"));
    }
    // sysfs returns EIO/EINVAL for counters the firmware cannot read.
    return PathError(path, err);
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> FileCache::ListDir(std::string_view relative) {
  Dir& dir = Check(StripSlashes(relative));
  if (dir.stat_errno != 0) return PathError(dir.path, dir.stat_errno);
  if (dir.listing) return *dir.listing;
  auto names = ListDirectory(dir.path);
  if (!names.ok()) return names.status();
  dir.listing = *names;
  return names;
}

}  // namespace rocefab
