#pragma once
// A blocking HTTP POST through libcurl, for the collector's outbound
// notifications and remote-write. Any thread; each call has its own handle.

#include <string>
#include <vector>

namespace rocefab {

struct HttpResult {
  long status = 0;     // 0 when no response came (see error)
  std::string error;   // transport error, empty when a response came
  std::string body;    // the response body, at most 4 KiB
};

struct HttpPostOptions {
  std::vector<std::string> headers;  // "Name: value"
  long timeout_ms = 5000;
  std::string basic_auth;            // "user:password", or empty
};

HttpResult HttpPost(const std::string& url, const std::string& body, const HttpPostOptions& options);

}  // namespace rocefab
