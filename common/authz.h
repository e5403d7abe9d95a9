#pragma once
// Authorization of every RPC by the peer certificate's identity
// (docs/security.md). One table names the roles each method needs; a
// method missing from it is denied. Servers call Check() first thing in
// every handler; the identity it returns is what audit records carry.

#include <grpcpp/grpcpp.h>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>

#include "rocefab/v1/config.pb.h"

namespace rocefab {

enum class Role : unsigned {
  kViewer = 1u << 0,
  kOperator = 1u << 1,
  kAdmin = 1u << 2,
  kController = 1u << 3,
  kAgent = 1u << 4,
};
using RoleSet = unsigned;
std::string_view RoleName(Role role);

// The roles any one of which may call `method` ("/rocefab.v1.Query/Silence");
// 0 when the method is not in the table.
RoleSet RolesFor(std::string_view method);
// Every method of the table, for tests and docs.
std::vector<std::string> AuthorizedMethods();

// The peer of a call: its certificate's subject CN, else its first DNS SAN.
// Empty when the call came without a verified certificate (plaintext).
std::string PeerIdentity(const grpc::ServerContextBase& context);

class Authorizer final {
 public:
  // `enforce` is false only in the explicit plaintext mode: then every call
  // is allowed and its identity is "unauthenticated".
  Authorizer(const v1::AuthorizationConfig& config, bool enforce);

  // OK, with *identity set to the caller's; else PERMISSION_DENIED (or
  // UNAUTHENTICATED without a certificate), logged and counted. A null
  // context is an in-process call by the daemon itself: allowed, as
  // `self_identity`.
  grpc::Status Check(const grpc::ServerContextBase* context, std::string_view method,
                     std::string* identity = nullptr) const;
  // Denials are also counted here, labelled by method (rocefab_grpc_denied_total).
  void CountIn(prometheus::Family<prometheus::Counter>* family) { family_ = family; }
  void set_self_identity(std::string identity) { self_identity_ = std::move(identity); }
  // The roles `identity` holds (admin and operator include the roles below).
  RoleSet RolesOf(const std::string& identity) const;
  bool enforcing() const { return enforce_; }


 private:
  v1::AuthorizationConfig config_;
  bool enforce_;
  std::string self_identity_ = "self";
  prometheus::Family<prometheus::Counter>* family_ = nullptr;
};

// The name an audit record carries: the authenticated identity; in the
// plaintext mode, "unauthenticated" with what the client claimed.
std::string AuditName(const std::string& identity, const std::string& claimed);

// True when `identity` matches `pattern`: equal, "*", or a prefix ending in '*'.
bool IdentityMatches(std::string_view pattern, std::string_view identity);

}  // namespace rocefab
