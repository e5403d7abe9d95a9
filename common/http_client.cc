#include "common/http_client.h"

#include <curl/curl.h>

#include <fstream>
#include <iterator>
#include <mutex>

#include "common/strings.h"

namespace rocefab {
namespace {

struct Sink {
  HttpResult* result;
  size_t max;
};

size_t Keep(char* data, size_t size, size_t n, void* user) {
  auto* sink = static_cast<Sink*>(user);
  std::string& body = sink->result->body;
  const size_t bytes = size * n;
  if (body.size() + bytes > sink->max) sink->result->truncated = true;
  if (body.size() < sink->max) body.append(data, std::min(bytes, sink->max - body.size()));
  return bytes;
}

}  // namespace

namespace {

// One request: a POST of `body`, or a GET when `body` is null.
HttpResult Perform(const std::string& url, const std::string* body, const HttpPostOptions& options) {
  static std::once_flag init;
  std::call_once(init, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  HttpResult result;
  CURL* curl = curl_easy_init();
  if (curl == nullptr) {
    result.error = "curl_easy_init failed";
    return result;
  }
  curl_slist* headers = nullptr;
  for (const std::string& h : options.headers) headers = curl_slist_append(headers, h.c_str());
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  if (body != nullptr) {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body->data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body->size()));
  }
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, options.timeout_ms);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Keep);
  Sink sink{&result, options.max_body_bytes};
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &sink);
  if (!options.basic_auth.empty()) {
    curl_easy_setopt(curl, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(curl, CURLOPT_USERPWD, options.basic_auth.c_str());
  }
  if (!options.ca_file.empty()) curl_easy_setopt(curl, CURLOPT_CAINFO, options.ca_file.c_str());
  if (!options.cert_file.empty()) curl_easy_setopt(curl, CURLOPT_SSLCERT, options.cert_file.c_str());
  if (!options.key_file.empty()) curl_easy_setopt(curl, CURLOPT_SSLKEY, options.key_file.c_str());
  const CURLcode rc = curl_easy_perform(curl);
  if (rc != CURLE_OK) result.error = curl_easy_strerror(rc);
  else curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &result.status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return result;
}

}  // namespace

HttpResult HttpPost(const std::string& url, const std::string& body, const HttpPostOptions& options) {
  return Perform(url, &body, options);
}

HttpResult HttpGet(const std::string& url, const HttpPostOptions& options) { return Perform(url, nullptr, options); }

std::string UrlEncode(std::string_view text) {
  char* escaped = curl_easy_escape(nullptr, text.data(), static_cast<int>(text.size()));
  std::string out = escaped ? escaped : "";
  curl_free(escaped);
  return out;
}

absl::StatusOr<std::string> ReadBasicAuthFile(const std::string& path, std::string_view what) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(StrCat(what, " basic_auth_file ", path, ": cannot read"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  if (text.find(':') == std::string::npos)
    return absl::InvalidArgumentError(StrCat(what, " basic_auth_file: expected user:password"));
  return text;
}

}  // namespace rocefab
