#include "common/metrics.h"

#include <crypt.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <microhttpd.h>
#include <netdb.h>
#include <prometheus/text_serializer.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "common/config_loader.h"
#include "common/fs_root.h"
#include "common/grpc_util.h"
#include "common/log.h"
#include "common/strings.h"
#include "rocefab/v1/config.pb.h"

namespace rocefab {

namespace {

constexpr char kComponent[] = "metrics";

// Checks `password` against a bcrypt hash, as exporter-toolkit does
// (libxcrypt's crypt_r knows $2a$, $2b$ and $2y$).
bool PasswordMatches(const std::string& password, const std::string& hash) {
  crypt_data data{};
  const char* out = crypt_r(password.c_str(), hash.c_str(), &data);
  return out != nullptr && out[0] != '*' && hash == out;
}

// What a file looked like when read: a rotation changes one of these.
struct FileStamp {
  struct timespec mtime {};
  off_t size = -1;
  ino_t inode = 0;
  bool operator==(const FileStamp& o) const {
    return mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec && size == o.size &&
           inode == o.inode;
  }
};
FileStamp Stamp(const std::string& path) {
  FileStamp stamp;
  struct stat st {};
  if (!path.empty() && stat(path.c_str(), &st) == 0) {
    stamp.mtime = st.st_mtim;
    stamp.size = st.st_size;
    stamp.inode = st.st_ino;
  }
  return stamp;
}

// The PEM files of tls_server_config, read and checked with GnuTLS.
struct TlsFiles {
  std::string cert, key, ca;  // PEM text; ca empty without client auth
};
absl::StatusOr<TlsFiles> ReadTls(const std::string& cert_path, const std::string& key_path,
                                 const std::string& ca_path) {
  TlsFiles files;
  auto cert = ReadWholeFile(cert_path);
  if (!cert.ok()) return absl::InvalidArgumentError(StrCat("tls_server_config.cert_file: ", Message(cert.status())));
  auto key = ReadWholeFile(key_path);
  if (!key.ok()) return absl::InvalidArgumentError(StrCat("tls_server_config.key_file: ", Message(key.status())));
  files.cert = std::move(*cert);
  files.key = std::move(*key);
  if (!ca_path.empty()) {
    auto ca = ReadWholeFile(ca_path);
    if (!ca.ok())
      return absl::InvalidArgumentError(StrCat("tls_server_config.client_ca_file: ", Message(ca.status())));
    files.ca = std::move(*ca);
  }
  // Load them once here, so that a wrong file is an error with its reason
  // rather than a server that fails every handshake.
  gnutls_certificate_credentials_t creds = nullptr;
  gnutls_certificate_allocate_credentials(&creds);
  const gnutls_datum_t cert_datum{reinterpret_cast<unsigned char*>(files.cert.data()),
                                  static_cast<unsigned>(files.cert.size())};
  const gnutls_datum_t key_datum{reinterpret_cast<unsigned char*>(files.key.data()),
                                 static_cast<unsigned>(files.key.size())};
  int rc = gnutls_certificate_set_x509_key_mem(creds, &cert_datum, &key_datum, GNUTLS_X509_FMT_PEM);
  std::string error;
  if (rc < 0)
    error = StrCat(cert_path, " and ", key_path, " are not a PEM certificate and its key: ", gnutls_strerror(rc));
  if (error.empty() && !files.ca.empty()) {
    const gnutls_datum_t ca_datum{reinterpret_cast<unsigned char*>(files.ca.data()),
                                  static_cast<unsigned>(files.ca.size())};
    rc = gnutls_certificate_set_x509_trust_mem(creds, &ca_datum, GNUTLS_X509_FMT_PEM);
    if (rc <= 0)
      error = StrCat(ca_path, ": no PEM CA certificate", rc < 0 ? StrCat(" (", gnutls_strerror(rc), ")") : "");
  }
  gnutls_certificate_free_credentials(creds);
  if (!error.empty()) return absl::InvalidArgumentError(StrCat("tls_server_config: ", error));
  return files;
}

// A path in a web config is relative to the file, as exporter-toolkit has it.
std::string Resolve(const std::string& path, const std::string& config_path) {
  if (path.empty() || path.front() == '/') return path;
  return (std::filesystem::path(config_path).parent_path() / path).string();
}

absl::StatusOr<int> Listen(const std::string& listen, std::string* bound) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(listen, &host, &port))
    return absl::InvalidArgumentError(StrCat("metrics listen address '", listen, "' is not host:port"));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &found); rc != 0)
    return absl::InvalidArgumentError(StrCat("cannot serve /metrics on ", listen, ": ", gai_strerror(rc)));
  std::string error = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 128) != 0) {
      error = strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) return absl::UnavailableError(StrCat("cannot serve /metrics on ", listen, ": ", error));
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int bound_port = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                                    : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  const bool v6 = host.find(':') != std::string::npos;
  *bound = v6 ? StrCat("[", host, "]:", bound_port) : StrCat(host, ":", bound_port);
  return fd;
}

}  // namespace

struct MetricsServer::Impl {
  int fd = -1;
  std::string bound_address;
  std::string cert_path, key_path, ca_path;  // empty: plain HTTP
  bool require_client_cert = false;
  std::map<std::string, std::string> users;  // basic auth: user -> bcrypt hash

  std::mutex mu;
  std::vector<std::weak_ptr<prometheus::Collectable>> collectables;
  // The running MHD daemon and the PEM text it serves (MHD keeps pointers).
  MHD_Daemon* daemon = nullptr;
  std::unique_ptr<TlsFiles> tls;
  FileStamp cert_stamp, key_stamp, ca_stamp;
  FileStamp failed_cert, failed_key, failed_ca;  // files that failed to load, not retried until they change

  // The server's own series.
  std::shared_ptr<prometheus::Registry> self = std::make_shared<prometheus::Registry>();
  prometheus::Family<prometheus::Counter>* requests = nullptr;
  prometheus::Family<prometheus::Counter>* reloads = nullptr;

  std::mutex watch_mu;
  std::condition_variable watch_cv;
  bool stopping = false;
  std::thread watcher;

  bool tls_on() const { return !cert_path.empty(); }

  absl::Status StartDaemon(std::unique_ptr<TlsFiles> files);
  void Watch(std::chrono::milliseconds interval);
  void Count(unsigned code) { requests->Add({{"code", std::to_string(code)}}).Increment(); }
  std::string Scrape();
  MHD_Result Answer(MHD_Connection* connection, const char* url, const char* method);
};

namespace {

MHD_Result Reply(MHD_Connection* connection, unsigned code, const std::string& body,
                 const char* content_type = "text/plain; charset=utf-8") {
  MHD_Response* response =
      MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  const MHD_Result result = MHD_queue_response(connection, code, response);
  MHD_destroy_response(response);
  return result;
}

MHD_Result Handle(void* cls, MHD_Connection* connection, const char* url, const char* method,
                  const char* /*version*/, const char* /*upload_data*/, size_t* /*upload_data_size*/,
                  void** /*request*/) {
  return static_cast<MetricsServer::Impl*>(cls)->Answer(connection, url, method);
}

// A client certificate that chains to client_ca_file, checked by GnuTLS.
bool ClientCertificateVerified(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_GNUTLS_SESSION);
  if (info == nullptr || info->tls_session == nullptr) return false;
  auto session = static_cast<gnutls_session_t>(info->tls_session);
  unsigned count = 0;
  if (gnutls_certificate_get_peers(session, &count) == nullptr || count == 0) return false;
  unsigned status = 0;
  return gnutls_certificate_verify_peers2(session, &status) == GNUTLS_E_SUCCESS && status == 0;
}

}  // namespace

std::string MetricsServer::Impl::Scrape() {
  std::vector<prometheus::MetricFamily> families;
  {
    std::lock_guard lock(mu);
    std::erase_if(collectables, [](const auto& weak) { return weak.expired(); });
    for (const auto& weak : collectables)
      if (auto collectable = weak.lock()) {
        auto collected = collectable->Collect();
        families.insert(families.end(), std::make_move_iterator(collected.begin()),
                        std::make_move_iterator(collected.end()));
      }
  }
  auto own = self->Collect();
  families.insert(families.end(), std::make_move_iterator(own.begin()), std::make_move_iterator(own.end()));
  return prometheus::TextSerializer().Serialize(families);
}

MHD_Result MetricsServer::Impl::Answer(MHD_Connection* connection, const char* url, const char* method) {
  if (require_client_cert && !ClientCertificateVerified(connection)) {
    Count(MHD_HTTP_FORBIDDEN);
    return Reply(connection, MHD_HTTP_FORBIDDEN, "a client certificate signed by the configured CA is required\n");
  }
  if (!users.empty()) {
    char* password = nullptr;
    char* user = MHD_basic_auth_get_username_password(connection, &password);
    bool ok = false;
    if (user != nullptr && password != nullptr) {
      auto it = users.find(user);
      ok = it != users.end() && PasswordMatches(password, it->second);
    }
    if (user != nullptr) MHD_free(user);
    if (password != nullptr) MHD_free(password);
    if (!ok) {
      Count(MHD_HTTP_UNAUTHORIZED);
      const std::string body = "unauthorized\n";
      MHD_Response* response =
          MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
      const MHD_Result result = MHD_queue_basic_auth_fail_response(connection, "rocefab", response);
      MHD_destroy_response(response);
      return result;
    }
  }
  const std::string_view verb(method);
  if (verb != MHD_HTTP_METHOD_GET && verb != MHD_HTTP_METHOD_HEAD) {
    Count(MHD_HTTP_METHOD_NOT_ALLOWED);
    return Reply(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET /metrics\n");
  }
  if (std::string_view(url) != "/metrics") {
    Count(MHD_HTTP_NOT_FOUND);
    return Reply(connection, MHD_HTTP_NOT_FOUND, "not found: rocefab serves /metrics\n");
  }
  Count(MHD_HTTP_OK);
  return Reply(connection, MHD_HTTP_OK, Scrape(), "text/plain; version=0.0.4; charset=utf-8");
}

absl::Status MetricsServer::Impl::StartDaemon(std::unique_ptr<TlsFiles> files) {
  // Internal polling thread with non-blocking sockets: a slow client does
  // not hold up a scrape.
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ITC;
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  if (addr.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  if (tls_on()) flags |= MHD_USE_TLS;
  std::vector<MHD_OptionItem> options = {
      {MHD_OPTION_LISTEN_SOCKET, fd, nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, 30, nullptr},
      {MHD_OPTION_CONNECTION_LIMIT, 64, nullptr},
  };
  if (tls_on()) {
    options.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, files->cert.data()});
    options.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, files->key.data()});
    if (!files->ca.empty()) options.push_back({MHD_OPTION_HTTPS_MEM_TRUST, 0, files->ca.data()});
  }
  options.push_back({MHD_OPTION_END, 0, nullptr});
  MHD_Daemon* started = MHD_start_daemon(flags, 0, nullptr, nullptr, &Handle, this, MHD_OPTION_ARRAY,
                                         options.data(), MHD_OPTION_END);
  if (started == nullptr) return absl::UnavailableError(StrCat("cannot serve /metrics on ", bound_address));
  MHD_Daemon* previous = nullptr;
  std::unique_ptr<TlsFiles> previous_tls;
  {
    std::lock_guard lock(mu);
    previous = daemon;
    daemon = started;
    previous_tls = std::exchange(tls, std::move(files));  // MHD points into the strings
  }
  if (previous != nullptr) MHD_stop_daemon(previous);  // before its PEM text goes
  return absl::OkStatus();
}

void MetricsServer::Impl::Watch(std::chrono::milliseconds interval) {
  std::unique_lock lock(watch_mu);
  while (!watch_cv.wait_for(lock, interval, [this] { return stopping; })) {
    const FileStamp cert = Stamp(cert_path), key = Stamp(key_path), ca = Stamp(ca_path);
    if (cert == cert_stamp && key == key_stamp && ca == ca_stamp) continue;
    if (cert == failed_cert && key == failed_key && ca == failed_ca) continue;
    auto files = ReadTls(cert_path, key_path, ca_path);
    if (!files.ok()) {
      failed_cert = cert;
      failed_key = key;
      failed_ca = ca;
      // A rotation caught half-written: keep serving the old certificate
      // and try again at the next look.
      reloads->Add({{"result", "error"}}).Increment();
      LOG_WARN(kComponent, "/metrics certificate not reloaded: ", Message(files.status()));
      continue;
    }
    // The old daemon stops accepting and hands its socket to the new one,
    // so no connection is refused in between.
    MHD_Daemon* old = nullptr;
    {
      std::lock_guard guard(mu);
      old = daemon;
    }
    if (MHD_quiesce_daemon(old) < 0) {
      reloads->Add({{"result", "error"}}).Increment();
      continue;
    }
    if (auto status = StartDaemon(std::make_unique<TlsFiles>(std::move(*files))); !status.ok()) {
      reloads->Add({{"result", "error"}}).Increment();
      LOG_ERROR(kComponent, "/metrics certificate reload: ", Message(status), "; serving the old one");
      // The old daemon no longer accepts: serve its certificate again.
      TlsFiles again = *tls;
      if (auto restart = StartDaemon(std::make_unique<TlsFiles>(std::move(again))); !restart.ok())
        LOG_ERROR(kComponent, "/metrics is down: ", Message(restart));
      continue;
    }
    cert_stamp = cert;
    key_stamp = key;
    ca_stamp = ca;
    reloads->Add({{"result", "ok"}}).Increment();
    LOG_INFO(kComponent, "/metrics serves the certificate in ", cert_path, " again (it changed)");
  }
}

MetricsServer::MetricsServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& listen,
                                                                   const std::string& web_config,
                                                                   std::chrono::milliseconds reload_interval) {
  auto impl = std::make_unique<Impl>();
  v1::WebConfig web;
  if (!web_config.empty()) {
    if (auto status = LoadYamlConfigFile(web_config, &web); !status.ok()) return status;
    for (const auto& [user, hash] : web.basic_auth_users())
      if (!hash.starts_with("$2"))
        return absl::InvalidArgumentError(StrCat(web_config, ": basic_auth_users.", user,
                                                 ": not a bcrypt hash (htpasswd -nBC 10 '' | tr -d ':')"));
    impl->users.insert(web.basic_auth_users().begin(), web.basic_auth_users().end());
  }
  const auto& tls = web.tls_server_config();
  auto files = std::make_unique<TlsFiles>();
  if (!tls.cert_file().empty() || !tls.key_file().empty() || !tls.client_ca_file().empty() ||
      !tls.client_auth_type().empty()) {
    if (tls.cert_file().empty() || tls.key_file().empty())
      return absl::InvalidArgumentError(
          StrCat(web_config, ": tls_server_config needs both cert_file and key_file"));
    const std::string& auth = tls.client_auth_type();
    if (!auth.empty() && auth != "NoClientCert" && auth != "RequireAndVerifyClientCert")
      return absl::InvalidArgumentError(StrCat(web_config, ": tls_server_config.client_auth_type '", auth,
                                               "' is not NoClientCert or RequireAndVerifyClientCert"));
    impl->require_client_cert = auth == "RequireAndVerifyClientCert";
    if (impl->require_client_cert && tls.client_ca_file().empty())
      return absl::InvalidArgumentError(
          StrCat(web_config, ": client_auth_type RequireAndVerifyClientCert needs client_ca_file"));
    impl->cert_path = Resolve(tls.cert_file(), web_config);
    impl->key_path = Resolve(tls.key_file(), web_config);
    impl->ca_path = Resolve(tls.client_ca_file(), web_config);
    impl->cert_stamp = Stamp(impl->cert_path);
    impl->key_stamp = Stamp(impl->key_path);
    impl->ca_stamp = Stamp(impl->ca_path);
    auto read = ReadTls(impl->cert_path, impl->key_path, impl->ca_path);
    if (!read.ok()) return absl::InvalidArgumentError(StrCat(web_config, ": ", Message(read.status())));
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
      return absl::UnimplementedError(
          StrCat(web_config, ": tls_server_config: this libmicrohttpd was built without TLS"));
    *files = std::move(*read);
  }
  impl->requests = &AddCounterFamily(*impl->self, "rocefab_metrics_requests_total",
                                     "HTTP requests to this /metrics endpoint, by status code");
  impl->reloads = &AddCounterFamily(*impl->self, "rocefab_metrics_tls_reloads_total",
                                    "Reloads of the /metrics TLS certificate after its files changed, by result");
  auto fd = Listen(listen, &impl->bound_address);
  if (!fd.ok()) return fd.status();
  impl->fd = *fd;
  if (auto status = impl->StartDaemon(std::move(files)); !status.ok()) {
    close(impl->fd);
    return status;
  }
  if (impl->tls_on())
    impl->watcher = std::thread([raw = impl.get(), reload_interval] { raw->Watch(reload_interval); });
  return std::unique_ptr<MetricsServer>(new MetricsServer(std::move(impl)));
}

MetricsServer::~MetricsServer() {
  {
    std::lock_guard lock(impl_->watch_mu);
    impl_->stopping = true;
  }
  impl_->watch_cv.notify_all();
  if (impl_->watcher.joinable()) impl_->watcher.join();
  if (impl_->daemon != nullptr) MHD_stop_daemon(impl_->daemon);  // closes the listening socket
}

void MetricsServer::Register(const std::shared_ptr<prometheus::Collectable>& collectable) {
  std::lock_guard lock(impl_->mu);
  impl_->collectables.push_back(collectable);
}

const std::string& MetricsServer::bound_address() const { return impl_->bound_address; }
const char* MetricsServer::scheme() const { return impl_->tls_on() ? "https" : "http"; }

prometheus::Counter& AddCounter(prometheus::Registry& registry, const std::string& name,
                                const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add({});
}

prometheus::Gauge& AddGauge(prometheus::Registry& registry, const std::string& name,
                            const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add({});
}

prometheus::Family<prometheus::Counter>& AddCounterFamily(prometheus::Registry& registry,
                                                          const std::string& name,
                                                          const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}

prometheus::Family<prometheus::Counter>& AddDeniedRpcs(prometheus::Registry& registry) {
  return AddCounterFamily(registry, "rocefab_grpc_denied_total",
                          "RPCs refused by authorization (PERMISSION_DENIED or UNAUTHENTICATED), by method");
}

}  // namespace rocefab
