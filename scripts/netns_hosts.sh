# Emulated hosts, sourced by the benchmarks and tests that need them: each host is a network
# namespace with one NIC (eth0, a veth) on a bridge in a hub namespace, optionally shaped by
# `tc tbf` to RATE in both directions (egress of both ends), as separate hosts with one NIC
# each. Addresses are SUBNET.1 .. SUBNET.N (a /24 that exists only inside the namespaces).
# Needs root and iproute2.
#
# Shaped hosts (RATE given) behave as hosts with NICs, not as processes sharing 2 cores:
# - TCP congestion control: cubic (Linux's default; $RR_NETNS_CC overrides) in every host,
#   whatever this machine's own default is. This machine's kernel defaults to bbr, whose
#   ProbeRTT phase drops a flow's window to 4 packets for 200 ms whenever 10 s pass without
#   a lower RTT sample, which never comes behind tbf's standing queue: runs longer than
#   ~8 s lost a few percent to it (docs/performance.md, "Emulated hosts"). A namespace may only pick a
#   congestion control that the host allows, so the host's allowed list gains it (its own
#   default is left as it is; hosts_down puts the list back).
# - RPS on every veth end (rps_cpus: all cores): a NIC keeps a flow's packets in order
#   (RSS), but a veth hands each packet to the backlog of the core its sender runs on, and
#   a sender that moves between cores gets its flow reordered (spurious fast retransmits).
#   RR_NETNS_RPS=off leaves it off (each packet handled on the core that sent it), to see
#   what the steering decides: with RPS a flow's packets land on a core by the hash of its
#   addresses and ports, so a small exchange's time depends on the draw (docs/performance.md,
#   "Small buckets next to Open MPI and Gloo").
#
#   hosts_up TAG N SUBNET [RATE]   makes TAG-0 .. TAG-(N-1) and TAG-hub; returns 77 (skip)
#                                  when namespaces cannot be made
#   hosts_link TAG R               the hub end of host R's link (to take it down)
#   hosts_down TAG N               removes them (safe to call twice, or after a failed up)
#   hosts_join TAG ADDR            puts this host on the bridge too, unshaped, as ADDR (a
#                                  launcher's own traffic, e.g. mpirun's PMIx server); the
#                                  link (TAG + "r") goes when hosts_down removes the hub
#   hosts_for_test TAG N SUBNET DIR  for a test: hosts_up, unshaped, with an EXIT trap that
#                                  kills the test's jobs, removes the hosts and DIR; exits 77
#                                  (skip) without root, iproute2 or namespaces

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
      hosts_like_nics "$tag" "$ns" "$hub" || return 1
    fi
  done
}

hosts_join() {
  local tag=$1 addr=$2
  ip link add "${tag}r" type veth peer name "${tag}h" || return 1
  ip link set "${tag}h" netns "$tag-hub"
  ip -n "$tag-hub" link set "${tag}h" master br0 up
  ip addr add "$addr/24" dev "${tag}r"
  ip link set "${tag}r" up
}

hosts_saved_allowed=
hosts_like_nics() {
  local tag=$1 ns=$2 hub=$3 cc=${RR_NETNS_CC:-cubic} cores allowed
  cores=$(printf '%x' $(( (1 << $(nproc)) - 1 )))
  [ "${RR_NETNS_RPS:-all}" = off ] && cores=0
  allowed=$(sysctl -n net.ipv4.tcp_allowed_congestion_control)
  if [[ " $allowed " != *" $cc "* ]]; then
    hosts_saved_allowed=$allowed
    sysctl -qw net.ipv4.tcp_allowed_congestion_control="$allowed $cc" || return 1
  fi
  ip netns exec "$ns" sysctl -qw net.ipv4.tcp_congestion_control="$cc" || return 1
  ip netns exec "$ns" sh -c "echo $cores > /sys/class/net/eth0/queues/rx-0/rps_cpus"
  ip netns exec "$tag-hub" sh -c "echo $cores > /sys/class/net/$hub/queues/rx-0/rps_cpus"
}

hosts_down() {
  local tag=$1 n=$2 r
  for ((r = 0; r < n; ++r)); do ip netns del "$tag-$r" 2>/dev/null; done
  ip netns del "$tag-hub" 2>/dev/null
  [ -n "$hosts_saved_allowed" ] && sysctl -qw net.ipv4.tcp_allowed_congestion_control="$hosts_saved_allowed"
  hosts_saved_allowed=
  return 0
}

hosts_for_test() {
  local tag=$1 n=$2 subnet=$3 dir=$4
  if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
    echo "network namespaces unavailable (need root and iproute2): skipping"
    rm -rf "$dir"
    exit 77
  fi
  # (expanded now: the trap runs after these locals are gone)
  trap "kill -9 \$(jobs -p) 2>/dev/null; hosts_down '$tag' $n; rm -rf '$dir'" EXIT
  hosts_up "$tag" "$n" "$subnet" || { echo "network namespaces unavailable: skipping"; exit 77; }
}
