#include "common/http_client.h"

#include <curl/curl.h>

#include <mutex>

namespace rocefab {
namespace {

size_t Keep(char* data, size_t size, size_t n, void* user) {
  auto* body = static_cast<std::string*>(user);
  const size_t bytes = size * n;
  if (body->size() < 4096) body->append(data, std::min(bytes, 4096 - body->size()));
  return bytes;
}

}  // namespace

HttpResult HttpPost(const std::string& url, const std::string& body, const HttpPostOptions& options) {
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
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, options.timeout_ms);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Keep);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &result.body);
  if (!options.basic_auth.empty()) {
    curl_easy_setopt(curl, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(curl, CURLOPT_USERPWD, options.basic_auth.c_str());
  }
  const CURLcode rc = curl_easy_perform(curl);
  if (rc != CURLE_OK) result.error = curl_easy_strerror(rc);
  else curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &result.status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return result;
}

}  // namespace rocefab
