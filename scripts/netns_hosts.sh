# Emulated hosts, sourced by the benchmarks and tests that need them: each host is a network
# namespace with one NIC (eth0, a veth) on a bridge in a hub namespace, optionally shaped by
# `tc tbf` to RATE in both directions (egress of both ends), as separate hosts with one NIC
# each. Addresses are SUBNET.1 .. SUBNET.N (a /24 that exists only inside the namespaces).
# Needs root and iproute2.
#
#   hosts_up TAG N SUBNET [RATE]   makes TAG-0 .. TAG-(N-1) and TAG-hub; returns 77 (skip)
#                                  when namespaces cannot be made
#   hosts_link TAG R               the hub end of host R's link (to take it down)
#   hosts_down TAG N               removes them (safe to call twice, or after a failed up)

hosts_link() { echo "${1}v$2"; }

hosts_up() {
  local tag=$1 n=$2 subnet=$3 rate=${4:-} r ns hub
  ip netns add "$tag-hub" 2>/dev/null || return 77
  ip -n "$tag-hub" link add br0 type bridge
  ip -n "$tag-hub" link set br0 up
  for ((r = 0; r < n; ++r)); do
    ns=$tag-$r
    hub=$(hosts_link "$tag" "$r")
    ip netns add "$ns"
    ip link add "$hub" type veth peer name eth0 netns "$ns"
    ip link set "$hub" netns "$tag-hub"
    ip -n "$tag-hub" link set "$hub" master br0 up
    ip -n "$ns" addr add "$subnet.$((r + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    if [ -n "$rate" ]; then
      ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 50ms
      ip netns exec "$tag-hub" tc qdisc add dev "$hub" root tbf rate "$rate" burst 256kb latency 50ms
    fi
  done
}

hosts_down() {
  local tag=$1 n=$2 r
  for ((r = 0; r < n; ++r)); do ip netns del "$tag-$r" 2>/dev/null; done
  ip netns del "$tag-hub" 2>/dev/null
  return 0
}
