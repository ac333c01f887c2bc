// Interface selection; see interfaces.h.
#include "transport/interfaces.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "transport/socket.h"

namespace rr {

InterfaceSpec parseInterfaceSpec(const std::string& text) {
  InterfaceSpec spec;
  std::string rest = text;
  if (!rest.empty() && rest[0] == '^') {
    spec.exclude = true;
    rest.erase(0, 1);
  }
  if (!rest.empty() && rest[0] == '=') {
    spec.exact = true;
    rest.erase(0, 1);
  }
  size_t start = 0;
  while (start <= rest.size()) {
    size_t comma = rest.find(',', start);
    if (comma == std::string::npos) comma = rest.size();
    if (comma > start) spec.names.push_back(rest.substr(start, comma - start));
    start = comma + 1;
  }
  return spec;
}

bool interfaceMatches(const InterfaceSpec& spec, const std::string& name) {
  bool listed = false;
  for (const auto& n : spec.names)
    if (spec.exact ? name == n : name.compare(0, n.size(), n) == 0) listed = true;
  return spec.exclude ? !listed : listed;
}

std::optional<InterfaceAddr> findInterface(const InterfaceSpec& spec) {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return std::nullopt;
  std::optional<InterfaceAddr> v4, v6;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || !(it->ifa_flags & IFF_UP)) continue;
    const int family = it->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (!interfaceMatches(spec, it->ifa_name)) continue;
    SockAddr addr;
    addr.len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&addr.storage, it->ifa_addr, addr.len);
    if (family == AF_INET6 &&
        IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6*>(&addr.storage)->sin6_addr))
      continue;  // a link-local address needs a scope id in every peer's table
    auto& slot = family == AF_INET ? v4 : v6;
    if (!slot) slot = InterfaceAddr{it->ifa_name, addr.ip()};
  }
  ::freeifaddrs(list);
  return v4 ? v4 : v6;
}

std::string chooseListenIp(int rank, const std::string& ifname, const std::string& routeIp,
                           spdlog::logger& log) {
  if (ifname.empty()) {
    log.info("using address {} (the route to rank 0; set RR_SOCKET_IFNAME to choose)", routeIp);
    return routeIp;
  }
  auto found = findInterface(parseInterfaceSpec(ifname));
  if (!found)
    fail(RR_ERR_INVALID_ARGUMENT, "rank {}: no interface that is up matches RR_SOCKET_IFNAME='{}'",
         rank, ifname);
  log.info("using interface {} address {} (RR_SOCKET_IFNAME={})", found->name, found->ip, ifname);
  return found->ip;
}

bool isAddressHere(const std::string& ip) {
  const SockAddr addr = makeAddr(ip, 0);
  Fd fd(::socket(addr.storage.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!fd) return true;
  return ::bind(fd.get(), addr.get(), addr.len) == 0 || errno != EADDRNOTAVAIL;
}

bool isLoopbackAddress(const std::string& ip) {
  const SockAddr addr = makeAddr(ip, 0);
  if (addr.storage.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&addr.storage);
    return (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
  }
  const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&addr.storage);
  if (IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr)) return v6->sin6_addr.s6_addr[12] == 127;
  return IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
}

bool sameHostAddress(const std::string& a, const std::string& b) {
  return a == b || (isLoopbackAddress(a) && isLoopbackAddress(b));
}

uint64_t namespaceInode(const char* name) {
  struct stat st{};
  const std::string path = std::string("/proc/self/ns/") + name;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

}  // namespace rr
