// Network interface selection with NCCL_SOCKET_IFNAME's syntax (RR_SOCKET_IFNAME):
//   "eth,ib"     interfaces whose names start with eth or ib
//   "^docker,lo" every interface except those starting with docker or lo
//   "=eth0"      exactly eth0 ("^=eth0": all but exactly eth0)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace spdlog {
class logger;
}

namespace rr {

struct InterfaceSpec {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;
};

InterfaceSpec parseInterfaceSpec(const std::string& spec);
bool interfaceMatches(const InterfaceSpec& spec, const std::string& name);

struct InterfaceAddr {
  std::string name;
  std::string ip;
};

// The first interface that is up and matches, preferring IPv4; nullopt if none does.
std::optional<InterfaceAddr> findInterface(const InterfaceSpec& spec);

// The IP a rank's transport listens on: the interface RR_SOCKET_IFNAME chooses (`ifname`),
// else `routeIp` (the route to rank 0); logged once. Throws RR_ERR_INVALID_ARGUMENT naming
// the rank and the spec when nothing matches.
std::string chooseListenIp(int rank, const std::string& ifname, const std::string& routeIp,
                           spdlog::logger& log);

// Whether `ip` (numeric) is an address of this process's network namespace: a loopback
// address or one an interface here has (bind to it succeeds). True where that cannot be
// told (no socket): a caller that skips work for an address elsewhere then does it.
bool isAddressHere(const std::string& ip);

// Whether `ip` (numeric) is a loopback address: 127.0.0.0/8, ::1, ::ffff:127.x.
bool isLoopbackAddress(const std::string& ip);

// Whether two addresses that ranks published (numeric) put them on one host: equal, or both
// loopback (127.0.0.0/8, ::1), since a rank reaches a loopback address only in its own
// network namespace (RR_ADDR=127.0.1.1, Debian's address for the host's name, and ranks
// that publish 127.0.0.1, their route to it).
bool sameHostAddress(const std::string& a, const std::string& b);

// The inode of one of this process's namespaces (/proc/self/ns/NAME: "pid", "ipc", "net"),
// 0 if unknown: two processes share the namespace exactly when the inodes are equal.
uint64_t namespaceInode(const char* name);

}  // namespace rr
