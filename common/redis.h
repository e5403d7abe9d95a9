#pragma once
// A Redis connection over hiredis: one database, synchronous commands and
// pipelines. SONiC keeps its switch state in Redis (docs/sonic-redis.md);
// rocefab-switchd's sonic backend and the lab's SONiC emulation talk to it
// through this.
//
// A broken connection is dropped and re-opened on the next call, so a
// restarted redis-server costs one failed poll. Not thread-safe: one
// connection per thread. The first connection sets SIGPIPE to be ignored,
// so that a vanished server is an error, not the end of the process.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

struct redisContext;

namespace rocefab {

struct RedisReply {
  enum class Type { kNil, kString, kStatus, kInteger, kArray, kError };
  Type type = Type::kNil;
  std::string str;  // string, status or error text
  int64_t integer = 0;
  std::vector<RedisReply> elements;

  bool is_error() const { return type == Type::kError; }
  // HGETALL's flat [field, value, ...] array as a map; empty for nil, an
  // error or any other shape.
  std::map<std::string, std::string> AsHash() const;
};

struct RedisAddress {
  std::string unix_path;  // set for a unix socket
  std::string host;       // else host and port
  int port = 0;
  std::string ToString() const;
};

// "unix:/var/run/redis/redis.sock", "/var/run/redis/redis.sock",
// "127.0.0.1:6379" or "[::1]:6379".
absl::StatusOr<RedisAddress> ParseRedisAddress(std::string_view text);

class RedisClient final {
 public:
  RedisClient(RedisAddress address, int db, int64_t timeout_us = 2'000'000);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  // One command. An error reply (WRONGTYPE ...) is a reply; only a failed
  // connection is an error status.
  absl::StatusOr<RedisReply> Command(const std::vector<std::string>& argv);
  // Sends every command, then reads every reply: one round trip.
  absl::StatusOr<std::vector<RedisReply>> Pipeline(const std::vector<std::vector<std::string>>& commands);
  // MULTI, the commands, EXEC: all or none. The replies are EXEC's. An
  // error reply inside is returned as Aborted (Redis does not roll back
  // commands that ran; callers write only commands that cannot fail on type).
  absl::StatusOr<std::vector<RedisReply>> Transaction(const std::vector<std::vector<std::string>>& commands);

  int db() const { return db_; }
  std::string Describe() const;  // "unix:/path db 2"

 private:
  absl::Status Connect();
  absl::StatusOr<std::vector<RedisReply>> PipelineOnce(const std::vector<std::vector<std::string>>& commands);
  absl::Status Broken(const char* what);

  RedisAddress address_;
  int db_;
  int64_t timeout_us_;
  redisContext* ctx_ = nullptr;
};

}  // namespace rocefab
