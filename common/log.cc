#include "common/log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>

namespace rocefab::log {
namespace {

std::atomic<int> g_min_level{static_cast<int>(Level::kInfo)};

// systemd sets JOURNAL_STREAM=<dev>:<inode> of the stream it connected to
// stderr; matching it tells us our stderr really is the journal.
bool DetectJournal() {
  const char* env = std::getenv("JOURNAL_STREAM");
  if (env == nullptr) return false;
  unsigned long long dev = 0, ino = 0;
  if (std::sscanf(env, "%llu:%llu", &dev, &ino) != 2) return false;
  struct stat st {};
  if (fstat(STDERR_FILENO, &st) != 0) return false;
  return st.st_dev == dev && st.st_ino == ino;
}

std::atomic<int> g_journal{-1};  // -1: not yet detected

bool JournalMode() {
  int mode = g_journal.load(std::memory_order_relaxed);
  if (mode < 0) {
    mode = DetectJournal() ? 1 : 0;
    g_journal.store(mode, std::memory_order_relaxed);
  }
  return mode == 1;
}

char LevelLetter(Level level) {
  switch (level) {
    case Level::kDebug: return 'D';
    case Level::kInfo: return 'I';
    case Level::kNotice: return 'N';
    case Level::kWarning: return 'W';
    case Level::kError: return 'E';
  }
  return '?';
}

}  // namespace

void SetMinLevel(Level level) { g_min_level.store(static_cast<int>(level)); }

bool ParseLevel(std::string_view text, Level* level) {
  if (text == "debug") *level = Level::kDebug;
  else if (text == "info") *level = Level::kInfo;
  else if (text == "notice") *level = Level::kNotice;
  else if (text == "warning" || text == "warn") *level = Level::kWarning;
  else if (text == "error") *level = Level::kError;
  else return false;
  return true;
}

void SetJournalMode(bool journal) { g_journal.store(journal ? 1 : 0); }

bool Enabled(Level level) {
  // Lower numbers are more severe, as in syslog.
  return static_cast<int>(level) <= g_min_level.load(std::memory_order_relaxed);
}

void Write(Level level, std::string_view component, std::string_view message) {
  std::string line;
  line.reserve(message.size() + 48);
  if (JournalMode()) {
    StrAppend(&line, "<", static_cast<int>(level), ">", component, ": ", message, "\n");
  } else {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    tm utc{};
    gmtime_r(&ts.tv_sec, &utc);
    char stamp[32];
    std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", utc.tm_year + 1900,
                  utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec,
                  ts.tv_nsec / 1000000);
    StrAppend(&line, stamp, " ", std::string(1, LevelLetter(level)), " ", component, ": ",
                    message, "\n");
  }
  // One write per line keeps lines whole when threads log at once.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace rocefab::log
