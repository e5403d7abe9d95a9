#include "common/redis.h"

#include <hiredis/hiredis.h>

#include <csignal>
#include <charconv>
#include <mutex>

#include "common/strings.h"

namespace rocefab {
namespace {

RedisReply Convert(const redisReply* reply) {
  RedisReply out;
  switch (reply->type) {
    case REDIS_REPLY_STRING: out.type = RedisReply::Type::kString; break;
    case REDIS_REPLY_STATUS: out.type = RedisReply::Type::kStatus; break;
    case REDIS_REPLY_ERROR: out.type = RedisReply::Type::kError; break;
    case REDIS_REPLY_INTEGER: out.type = RedisReply::Type::kInteger; break;
    case REDIS_REPLY_ARRAY: out.type = RedisReply::Type::kArray; break;
    default: out.type = RedisReply::Type::kNil; break;
  }
  if (reply->str != nullptr) out.str.assign(reply->str, reply->len);
  out.integer = reply->integer;
  if (reply->type == REDIS_REPLY_ARRAY) {
    out.elements.reserve(reply->elements);
    for (size_t i = 0; i < reply->elements; ++i) out.elements.push_back(Convert(reply->element[i]));
  }
  return out;
}

timeval ToTimeval(int64_t us) {
  return timeval{static_cast<time_t>(us / 1'000'000), static_cast<suseconds_t>(us % 1'000'000)};
}

}  // namespace

std::map<std::string, std::string> RedisReply::AsHash() const {
  std::map<std::string, std::string> out;
  if (type != Type::kArray) return out;
  for (size_t i = 0; i + 1 < elements.size(); i += 2) out[elements[i].str] = elements[i + 1].str;
  return out;
}

std::string RedisAddress::ToString() const {
  return unix_path.empty() ? StrCat(host, ":", port) : StrCat("unix:", unix_path);
}

absl::StatusOr<RedisAddress> ParseRedisAddress(std::string_view text) {
  RedisAddress address;
  if (text.rfind("unix:", 0) == 0) text.remove_prefix(5);
  if (!text.empty() && text.front() == '/') {
    address.unix_path = std::string(text);
    return address;
  }
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size())
    return absl::InvalidArgumentError(
        StrCat("redis address '", std::string(text), "' is neither unix:/path nor host:port"));
  std::string_view host = text.substr(0, colon), port = text.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), address.port);
  if (ec != std::errc() || ptr != port.data() + port.size() || address.port <= 0 || address.port > 65535)
    return absl::InvalidArgumentError(StrCat("redis address '", std::string(text), "': bad port"));
  address.host = std::string(host);
  return address;
}

RedisClient::RedisClient(RedisAddress address, int db, int64_t timeout_us)
    : address_(std::move(address)), db_(db), timeout_us_(timeout_us) {}

RedisClient::~RedisClient() {
  if (ctx_ != nullptr) redisFree(ctx_);
}

std::string RedisClient::Describe() const { return StrCat(address_.ToString(), " db ", db_); }

absl::Status RedisClient::Broken(const char* what) {
  std::string message = StrCat("redis ", Describe(), ": ", what);
  if (ctx_ != nullptr) {
    if (ctx_->err != 0) StrAppend(&message, ": ", ctx_->errstr);
    redisFree(ctx_);
    ctx_ = nullptr;
  }
  return absl::UnavailableError(message);
}

absl::Status RedisClient::Connect() {
  if (ctx_ != nullptr) return absl::OkStatus();
  // hiredis writes with write(2): a server that went away must give EPIPE,
  // not a SIGPIPE that ends the process.
  static std::once_flag ignore_sigpipe;
  std::call_once(ignore_sigpipe, [] { std::signal(SIGPIPE, SIG_IGN); });
  const timeval tv = ToTimeval(timeout_us_);
  ctx_ = address_.unix_path.empty() ? redisConnectWithTimeout(address_.host.c_str(), address_.port, tv)
                                    : redisConnectUnixWithTimeout(address_.unix_path.c_str(), tv);
  if (ctx_ == nullptr) return absl::ResourceExhaustedError("redis: cannot allocate a connection");
  if (ctx_->err != 0) return Broken("cannot connect");
  if (redisSetTimeout(ctx_, tv) != REDIS_OK) return Broken("cannot set the timeout");
  if (db_ != 0) {
    const std::string db = std::to_string(db_);
    const char* argv[] = {"SELECT", db.c_str()};
    const size_t lens[] = {6, db.size()};
    auto* reply = static_cast<redisReply*>(redisCommandArgv(ctx_, 2, argv, lens));
    if (reply == nullptr) return Broken("SELECT failed");
    const bool ok = reply->type == REDIS_REPLY_STATUS;
    const std::string text = reply->str != nullptr ? std::string(reply->str, reply->len) : "";
    freeReplyObject(reply);
    if (!ok) {
      redisFree(ctx_);
      ctx_ = nullptr;
      return absl::FailedPreconditionError(StrCat("redis ", Describe(), ": SELECT: ", text));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RedisReply> RedisClient::Command(const std::vector<std::string>& argv) {
  auto replies = Pipeline({argv});
  if (!replies.ok()) return replies.status();
  return std::move(replies->front());
}

absl::StatusOr<std::vector<RedisReply>> RedisClient::Pipeline(
    const std::vector<std::vector<std::string>>& commands) {
  // A connection that broke while idle (the server restarted) fails on
  // first use: that is retried once on a fresh one. Every command rocefab
  // sends is idempotent (reads, HSET, HDEL), so a retry cannot double an effect.
  const bool reused = ctx_ != nullptr;
  auto replies = PipelineOnce(commands);
  if (!replies.ok() && reused && absl::IsUnavailable(replies.status())) replies = PipelineOnce(commands);
  return replies;
}

absl::StatusOr<std::vector<RedisReply>> RedisClient::PipelineOnce(
    const std::vector<std::vector<std::string>>& commands) {
  if (auto status = Connect(); !status.ok()) return status;
  std::vector<const char*> argv;
  std::vector<size_t> lens;
  for (const auto& command : commands) {
    argv.clear();
    lens.clear();
    for (const auto& arg : command) {
      argv.push_back(arg.data());
      lens.push_back(arg.size());
    }
    if (redisAppendCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()) != REDIS_OK)
      return Broken("cannot queue a command");
  }
  std::vector<RedisReply> replies;
  replies.reserve(commands.size());
  for (size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(ctx_, &raw) != REDIS_OK || raw == nullptr) return Broken("no reply");
    replies.push_back(Convert(static_cast<redisReply*>(raw)));
    freeReplyObject(raw);
  }
  return replies;
}

absl::StatusOr<std::vector<RedisReply>> RedisClient::Transaction(
    const std::vector<std::vector<std::string>>& commands) {
  std::vector<std::vector<std::string>> all;
  all.reserve(commands.size() + 2);
  all.push_back({"MULTI"});
  all.insert(all.end(), commands.begin(), commands.end());
  all.push_back({"EXEC"});
  auto replies = Pipeline(all);
  if (!replies.ok()) return replies.status();
  for (size_t i = 1; i + 1 < replies->size(); ++i)
    if ((*replies)[i].is_error())  // refused at queue time: EXEC discards all
      return absl::AbortedError(StrCat("redis refused ", commands[i - 1].front(), ": ", (*replies)[i].str));
  RedisReply& exec = replies->back();
  if (exec.is_error()) return absl::AbortedError(StrCat("redis EXEC: ", exec.str));
  if (exec.type != RedisReply::Type::kArray) return absl::AbortedError("redis EXEC: the transaction was discarded");
  for (size_t i = 0; i < exec.elements.size(); ++i)
    if (exec.elements[i].is_error())
      return absl::AbortedError(StrCat("redis ", commands[i].front(), " failed inside EXEC: ", exec.elements[i].str));
  return std::move(exec.elements);
}

}  // namespace rocefab
