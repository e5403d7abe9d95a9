#include "common/authz.h"

#include "common/log.h"
#include "common/strings.h"

namespace rocefab {
namespace {

constexpr char kAuthzLog[] = "authz";

constexpr RoleSet R(Role role) { return static_cast<RoleSet>(role); }
constexpr RoleSet kRead = R(Role::kViewer);
constexpr RoleSet kOperate = R(Role::kOperator);

// Every RPC of every service. Reads are the viewer's; changes to the fabric
// or to what on-call sees are the operator's; a rollout is the admin's.
const std::map<std::string, RoleSet, std::less<>>& Table() {
  static const auto* table = new std::map<std::string, RoleSet, std::less<>>{
      {"/rocefab.v1.Telemetry/Push", R(Role::kAgent)},
      {"/rocefab.v1.Query/ListAgents", kRead},
      {"/rocefab.v1.Query/GetCounters", kRead},
      {"/rocefab.v1.Query/StartJob", kOperate},
      {"/rocefab.v1.Query/EndJob", kOperate},
      {"/rocefab.v1.Query/ListJobs", kRead},
      {"/rocefab.v1.Query/JobTimeline", kRead},
      {"/rocefab.v1.Query/ListAnomalies", kRead},
      {"/rocefab.v1.Query/DiagnoseJob", kRead},
      {"/rocefab.v1.Query/ListAlerts", kRead},
      {"/rocefab.v1.Query/Silence", kOperate},
      {"/rocefab.v1.Query/Unsilence", kOperate},
      {"/rocefab.v1.Query/RecordPlaybookRun", kOperate},
      {"/rocefab.v1.Query/ListPlaybookRuns", kRead},
      {"/rocefab.v1.Query/TrafficMatrix", kRead},
      {"/rocefab.v1.Controller/Plan", kRead},
      {"/rocefab.v1.Controller/Status", kRead},
      {"/rocefab.v1.Controller/History", kRead},
      {"/rocefab.v1.Controller/Drain", kOperate},
      {"/rocefab.v1.Controller/Apply", R(Role::kAdmin)},
      {"/rocefab.v1.Controller/Abort", R(Role::kAdmin)},
      {"/rocefab.v1.SwitchAgent/ApplyConfig", R(Role::kController)},
      {"/rocefab.v1.SwitchAgent/GetState", R(Role::kController) | kRead},
  };
  return *table;
}

std::string Property(const grpc::AuthContext& auth, const char* name) {
  for (const auto& value : auth.FindPropertyValues(name)) return std::string(value.data(), value.size());
  return "";
}

bool AnyMatches(const google::protobuf::RepeatedPtrField<std::string>& patterns,
                std::initializer_list<const char*> defaults, const std::string& identity) {
  if (patterns.empty()) {
    for (const char* pattern : defaults)
      if (IdentityMatches(pattern, identity)) return true;
    return false;
  }
  for (const auto& pattern : patterns)
    if (IdentityMatches(pattern, identity)) return true;
  return false;
}

}  // namespace

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kViewer: return "viewer";
    case Role::kOperator: return "operator";
    case Role::kAdmin: return "admin";
    case Role::kController: return "controller";
    case Role::kAgent: return "agent";
  }
  return "?";
}

RoleSet RolesFor(std::string_view method) {
  auto it = Table().find(method);
  return it == Table().end() ? 0 : it->second;
}

std::vector<std::string> AuthorizedMethods() {
  std::vector<std::string> out;
  for (const auto& [method, roles] : Table()) out.push_back(method);
  return out;
}

bool IdentityMatches(std::string_view pattern, std::string_view identity) {
  if (identity.empty()) return false;
  if (pattern == "*") return true;
  if (!pattern.empty() && pattern.back() == '*')
    return identity.starts_with(pattern.substr(0, pattern.size() - 1));
  return pattern == identity;
}

std::string AuditName(const std::string& identity, const std::string& claimed) {
  if (identity == "unauthenticated" && !claimed.empty()) return StrCat("unauthenticated (claims ", claimed, ")");
  return identity;
}

std::string PeerIdentity(const grpc::ServerContextBase& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (!auth || !auth->IsPeerAuthenticated()) return "";
  std::string name = Property(*auth, "x509_common_name");
  if (name.empty()) name = Property(*auth, "x509_subject_alternative_name");
  return name;
}

Authorizer::Authorizer(const v1::AuthorizationConfig& config, bool enforce)
    : config_(config), enforce_(enforce) {}

RoleSet Authorizer::RolesOf(const std::string& identity) const {
  RoleSet roles = 0;
  if (AnyMatches(config_.admin(), {}, identity)) roles |= R(Role::kAdmin) | R(Role::kOperator) | kRead;
  if (AnyMatches(config_.operator_(), {}, identity)) roles |= R(Role::kOperator) | kRead;
  if (AnyMatches(config_.viewer(), {"*"}, identity)) roles |= kRead;
  if (AnyMatches(config_.controller(), {"rocefab-controllerd"}, identity)) roles |= R(Role::kController);
  if (AnyMatches(config_.agent(), {"*"}, identity)) roles |= R(Role::kAgent);
  return roles;
}

grpc::Status Authorizer::Check(const grpc::ServerContextBase* call, std::string_view method,
                               std::string* identity) const {
  if (call == nullptr) {
    if (identity) *identity = self_identity_;
    return grpc::Status::OK;
  }
  const grpc::ServerContextBase& context = *call;
  if (!enforce_) {
    if (identity) *identity = "unauthenticated";
    return grpc::Status::OK;
  }
  const std::string who = PeerIdentity(context);
  const RoleSet needed = RolesFor(method);
  std::string why;
  grpc::StatusCode code = grpc::StatusCode::PERMISSION_DENIED;
  if (who.empty()) {
    code = grpc::StatusCode::UNAUTHENTICATED;
    why = "no verified client certificate";
  } else if (needed == 0) {
    why = "the method is not in the authorization table";
  } else if ((RolesOf(who) & needed) == 0) {
    std::string roles;
    for (Role role : {Role::kViewer, Role::kOperator, Role::kAdmin, Role::kController, Role::kAgent})
      if (needed & R(role)) StrAppend(&roles, roles.empty() ? "" : " or ", RoleName(role));
    why = StrCat("'", who, "' does not hold the ", roles, " role");
  }
  if (why.empty()) {
    if (identity) *identity = who;
    return grpc::Status::OK;
  }
  if (family_) family_->Add({{"method", std::string(method)}}).Increment();
  LOG_WARN(kAuthzLog, "denied ", method, " from ", context.peer(), ": ", why);
  return grpc::Status(code, StrCat(method, ": ", why));
}


}  // namespace rocefab
