#include "common/batch_spool.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "common/log.h"
#include "common/strings.h"

namespace rocefab {
namespace {

constexpr char kBatchSpoolLog[] = "spool";
namespace fs = std::filesystem;

bool ValidBootName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_')) return false;
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BatchSpool>> BatchSpool::Open(const std::string& dir, uint64_t max_bytes) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    return absl::InvalidArgumentError(
        StrCat("spool directory ", dir, ": ", ec ? ec.message() : "not a directory"));
  if (max_bytes == 0) return absl::InvalidArgumentError("spool: max bytes must be positive");
  return std::unique_ptr<BatchSpool>(new BatchSpool(dir, max_bytes));
}

std::string BatchSpool::PathOf(const std::string& boot, uint64_t seq) const {
  return StrCat(dir_, "/", boot, "/", seq, ".pb");
}

std::map<std::string, BatchSpool::Queue> BatchSpool::Load(const std::string& current_boot) {
  current_boot_ = current_boot;
  std::map<std::string, Queue> out;
  std::error_code ec;
  // Oldest boot first: by the modification time of its oldest file.
  std::vector<std::pair<fs::file_time_type, std::string>> boots;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename();
    if (!entry.is_directory(ec) || name == current_boot) continue;
    if (!ValidBootName(name)) continue;
    fs::file_time_type oldest = fs::file_time_type::max();
    for (const auto& f : fs::directory_iterator(entry.path(), ec))
      oldest = std::min(oldest, f.last_write_time(ec));
    boots.emplace_back(oldest, name);
  }
  std::sort(boots.begin(), boots.end());
  for (const auto& [when, boot] : boots) {
    const uint64_t order = next_order_++;
    Queue queue;
    for (const auto& f : fs::directory_iterator(dir_ + "/" + boot, ec)) {
      const std::string file = f.path().filename();
      char* end = nullptr;
      const uint64_t seq = std::strtoull(file.c_str(), &end, 10);
      v1::TelemetryBatch batch;
      std::ifstream in(f.path(), std::ios::binary);
      const bool ok = seq > 0 && end && std::string(end) == ".pb" && batch.ParseFromIstream(&in) &&
                      batch.agent_boot_id() == boot && batch.seq() == seq;
      if (!ok) {
        // A torn temporary file, or a file that is not ours: never replayed.
        ++corrupt_;
        LOG_WARN(kBatchSpoolLog, "removing unreadable spool file ", f.path().string());
        fs::remove(f.path(), ec);
        continue;
      }
      const uint64_t size = f.file_size(ec);
      sizes_[{order, seq}] = size;
      bytes_ += size;
      queue.emplace(seq, std::move(batch));
    }
    if (queue.empty()) {
      fs::remove_all(dir_ + "/" + boot, ec);
      continue;
    }
    boot_order_[boot] = order;
    boot_of_order_[order] = boot;
    LOG_INFO(kBatchSpoolLog, "found ", queue.size(), " unacked batches of an earlier run (boot ", boot, ")");
    out.emplace(boot, std::move(queue));
  }
  return out;
}

std::vector<std::pair<std::string, uint64_t>> BatchSpool::Put(const v1::TelemetryBatch& batch) {
  std::vector<std::pair<std::string, uint64_t>> evicted;
  const std::string& boot = batch.agent_boot_id();
  auto [it, fresh] = boot_order_.emplace(boot, next_order_);
  if (fresh) {
    boot_of_order_[next_order_++] = boot;
    std::error_code ec;
    fs::create_directories(dir_ + "/" + boot, ec);
  }
  const std::string path = PathOf(boot, batch.seq());
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out || !batch.SerializeToOstream(&out)) {
      ++write_errors_;
      LOG_WARN(kBatchSpoolLog, "cannot write ", tmp, ": the batch is kept in memory only");
      return evicted;
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    ++write_errors_;
    fs::remove(tmp, ec);
    return evicted;
  }
  const uint64_t size = batch.ByteSizeLong();
  sizes_[{it->second, batch.seq()}] = size;
  bytes_ += size;
  while (bytes_ > max_bytes_ && sizes_.size() > 1) {
    const auto oldest = sizes_.begin();
    const std::string& old_boot = boot_of_order_[oldest->first.first];
    evicted.emplace_back(old_boot, oldest->first.second);
    ++evicted_;
    fs::remove(PathOf(old_boot, oldest->first.second), ec);
    bytes_ -= oldest->second;
    sizes_.erase(oldest);
  }
  return evicted;
}

void BatchSpool::Remove(const std::string& boot, uint64_t seq) {
  auto order = boot_order_.find(boot);
  if (order == boot_order_.end()) return;
  auto it = sizes_.find({order->second, seq});
  if (it == sizes_.end()) return;
  std::error_code ec;
  fs::remove(PathOf(boot, seq), ec);
  bytes_ -= it->second;
  sizes_.erase(it);
  // The last file of an earlier boot: its directory goes too.
  const auto next = sizes_.lower_bound({order->second, 0});
  if ((next == sizes_.end() || next->first.first != order->second) &&
      boot != current_boot_) {
    fs::remove_all(dir_ + "/" + boot, ec);
  }
}

}  // namespace rocefab
