#pragma once
// QoS on a Linux switch, item by item, through rtnetlink with libnl
// messages (libnl has no dcbnl objects and its RED object carries only the
// limit):
//   qos/pfc     dcbnl IEEE PFC: the enabled priorities, per Ethernet port;
//   qos/ets     dcbnl IEEE ETS: the strict-priority class strict, the others
//               ETS with equal shares;
//   qos/dscp    dcbnl IEEE APP table: DSCP -> priority (selector DSCP);
//   qos/ecn     a RED qdisc with ECN marking (Kmin, Kmax, Pmax) as each
//               port's root qdisc;
//   qos/pfc_watchdog, qos/buffer: Linux has neither.
// Each item asks the kernel first and, where a port cannot take it, answers
// Unimplemented naming the port and what is missing (`unsupported: ...` in
// the switch's state), never a blanket error: veth has no DCB, and kernels
// built without sch_red have no RED.

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rocefab/v1/control.pb.h"

struct nl_sock;

namespace rocefab::switchd {

class LinuxQos final {
 public:
  explicit LinuxQos(nl_sock* sock) : sock_(sock) {}
  // The QoS item `item` (key qos/<part>) on every Ethernet* interface.
  absl::Status Install(const v1::ConfigItem& item);
  absl::Status Remove(const v1::ConfigItem& item);

  // The Ethernet* interfaces, sorted.
  absl::StatusOr<std::vector<std::string>> Ports();
  // OK if `port` answers dcbnl IEEE requests; Unimplemented (with the
  // kernel's reason) if it has no DCB.
  absl::Status ProbeDcb(const std::string& port);

 private:
  absl::Status SetPfc(const std::string& port, uint8_t enabled_mask);
  absl::Status SetEts(const std::string& port, uint32_t strict_tc);
  absl::Status SetDscp(const std::string& port, const v1::QosPolicy& qos, bool remove);
  absl::Status SetRed(const std::string& port, const v1::EcnSettings& ecn);
  absl::Status RemoveRoot(const std::string& port);
  absl::Status RemoveItem(const v1::ConfigItem& item);
  // Every port must pass `probe` before any is changed.
  absl::Status OnEveryPort(const std::string& what, bool needs_dcb,
                           const std::function<absl::Status(const std::string&)>& apply);

  nl_sock* sock_;
};

}  // namespace rocefab::switchd
