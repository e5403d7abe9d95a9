#pragma once
// Logging for daemons run under systemd and by hand.
//
// Under systemd (JOURNAL_STREAM is set and points at our stderr) each line is
// prefixed with the sd-daemon priority "<N>" so journald records its level,
// and no timestamp is added (journald has its own). Elsewhere lines read
// "2026-01-02T03:04:05.678Z W component: message".
// Thread-safe: one write(2) per line.

#include <string_view>

#include "common/strings.h"

namespace rocefab::log {

enum class Level { kDebug = 7, kInfo = 6, kNotice = 5, kWarning = 4, kError = 3 };

// Lines below this level are dropped. Default kInfo.
void SetMinLevel(Level level);
// Parses "debug", "info", "notice", "warning", "error". Returns false if unknown.
bool ParseLevel(std::string_view text, Level* level);
// Forces journald-style output on or off (tests); normally detected.
void SetJournalMode(bool journal);
bool Enabled(Level level);
void Write(Level level, std::string_view component, std::string_view message);

}  // namespace rocefab::log

#define ROCEFAB_LOG(level, component, ...)                                            \
  do {                                                                                \
    if (::rocefab::log::Enabled(level))                                               \
      ::rocefab::log::Write(level, component, ::rocefab::StrCat(__VA_ARGS__));           \
  } while (0)
#define LOG_DEBUG(component, ...) ROCEFAB_LOG(::rocefab::log::Level::kDebug, component, __VA_ARGS__)
#define LOG_INFO(component, ...) ROCEFAB_LOG(::rocefab::log::Level::kInfo, component, __VA_ARGS__)
#define LOG_WARN(component, ...) ROCEFAB_LOG(::rocefab::log::Level::kWarning, component, __VA_ARGS__)
#define LOG_ERROR(component, ...) ROCEFAB_LOG(::rocefab::log::Level::kError, component, __VA_ARGS__)
