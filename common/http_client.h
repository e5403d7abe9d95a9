#pragma once
// A blocking HTTP POST (or GET) through libcurl, for the collector's outbound
// notifications, remote-write and PromQL history reads. Any thread; each
// call has its own handle.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace rocefab {

struct HttpResult {
  long status = 0;     // 0 when no response came (see error)
  std::string error;   // transport error, empty when a response came
  std::string body;    // the response body, at most max_body_bytes
  bool truncated = false;  // the body was longer than max_body_bytes
};

struct HttpPostOptions {
  std::vector<std::string> headers;  // "Name: value"
  long timeout_ms = 5000;
  std::string basic_auth;            // "user:password", or empty
  size_t max_body_bytes = 4096;      // of the response kept
  // https:// only: the CA that signs the server (empty: the system's), and
  // a client certificate and key to present (empty: none).
  std::string ca_file, cert_file, key_file;
};

HttpResult HttpPost(const std::string& url, const std::string& body, const HttpPostOptions& options);
HttpResult HttpGet(const std::string& url, const HttpPostOptions& options);

// Percent-encoding for application/x-www-form-urlencoded bodies.
std::string UrlEncode(std::string_view text);

// "user:password" from a file (trailing newline dropped); `what` names the
// setting in errors.
absl::StatusOr<std::string> ReadBasicAuthFile(const std::string& path, std::string_view what);

}  // namespace rocefab
