#include "common/fs_root.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/strings.h"

namespace rocefab {

FsRoot::FsRoot(std::string root) : root_(std::move(root)) {
  while (root_.size() > 1 && root_.back() == '/') root_.pop_back();
  if (root_ == "/") root_.clear();
}

std::string FsRoot::Resolve(std::string_view relative) const {
  while (!relative.empty() && relative.front() == '/') relative.remove_prefix(1);
  return StrCat(root_, "/", relative);
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return PathError(path, errno);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      // sysfs returns EIO/EINVAL for counters the firmware cannot read.
      return absl::UnavailableError(StrCat(path, ": ", std::strerror(err)));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    // A short read of a regular or sysfs file means end of file: sysfs
    // returns a whole attribute in one read. Skipping the read that would
    // return 0 saves a syscall per counter on the poll path.
    if (static_cast<size_t>(n) < sizeof buf) break;
  }
  ::close(fd);
  return out;
}

absl::StatusOr<std::string> FsRoot::ReadFile(std::string_view relative) const {
  return ReadWholeFile(Resolve(relative));
}

absl::StatusOr<std::vector<std::string>> FsRoot::ListDir(std::string_view relative) const {
  return ListDirectory(Resolve(relative));
}

absl::Status PathError(std::string_view path, int err) {
  if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(StrCat(path, ": missing"));
  return absl::UnavailableError(StrCat(path, ": ", std::strerror(err)));
}

absl::StatusOr<std::vector<std::string>> ListDirectory(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return PathError(path, errno);
  std::vector<std::string> names;
  while (dirent* entry = ::readdir(dir)) {
    std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    names.emplace_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

bool FsRoot::Exists(std::string_view relative) const {
  struct stat st {};
  return ::stat(Resolve(relative).c_str(), &st) == 0;
}

absl::Status WriteFileAtomic(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::UnavailableError(StrCat("cannot write ", tmp, ": ", std::strerror(errno)));
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return absl::UnavailableError(StrCat("cannot write ", tmp, ": ", std::strerror(err)));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return absl::UnavailableError(StrCat("cannot rename to ", path, ": ", std::strerror(errno)));
  return absl::OkStatus();
}

std::string_view TrimRight(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ' || text.back() == '\t' ||
                           text.back() == '\r'))
    text.remove_suffix(1);
  return text;
}

std::string_view Trim(std::string_view text) {
  text = TrimRight(text);
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  return text;
}

bool IsProcfsMount(const std::string& path) {
  struct statfs fs {};
  return ::statfs(path.c_str(), &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;
}

}  // namespace rocefab
