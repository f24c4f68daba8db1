#!/usr/bin/env bash
# A cluster on one machine: N "hosts" that share neither network nor /tmp, for testing what
# einsumdb does when its ranks leave the host. Needs root (network and mount namespaces).
#
#   scripts/cluster.sh up DIR N [RATE]   make hosts h0 .. h(N-1) (RATE: their links' bandwidth,
#                                        e.g. 1gbit; default unshaped)
#   scripts/cluster.sh down DIR          remove everything `up` made (also after a failed test)
#
# Each host is a network namespace with an address of its own (10.231.0.(k+1) on a bridge in a
# namespace of the fixture's), a mount namespace whose /tmp is its own tmpfs (so its working
# directory, inputs and HOME=/tmp/home are its own), and a UTS namespace with the host's name.
# A process that holds the namespaces (sleep) stands for the host. DIR, which must not lie under
# /tmp (each host mounts its own /tmp over it), receives:
#   DIR/hostfile        the hosts for mpirun's --hostfile
#   DIR/on HOST CMD...  runs CMD on HOST (in its namespaces, with HOME=/tmp/home)
#   DIR/rsh HOST CMD    OpenMPI's launcher agent (plm_rsh_agent): what ssh would do, without ssh
#   DIR/mpirun ARGS...  mpirun started on h0 as a user there would, launching through DIR/rsh and
#                       talking TCP over the hosts' links only (btl tcp, not shared memory)
#   DIR/link HOST up|down   brings HOST's link up or down (a cut cable)
#   DIR/pids HOST       the processes running on HOST
set -euo pipefail

die() {
  echo "cluster.sh: $*" >&2
  exit 2
}

[ $# -ge 2 ] || die "usage: cluster.sh up DIR N [RATE] | down DIR"
cmd=$1 dir=$2

case "$dir" in
  /tmp | /tmp/*) die "DIR must not lie under /tmp: each host mounts its own /tmp" ;;
esac

down() {
  [ -f "$dir/prefix" ] || return 0
  local prefix
  prefix=$(cat "$dir/prefix")
  for pid_file in "$dir"/h*.pid; do
    [ -f "$pid_file" ] && kill -9 "$(cat "$pid_file")" 2>/dev/null || true
  done
  # Processes still inside a host's namespaces (ranks, daemons, a server) end with it.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$prefix" || true); do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
    ip netns delete "$ns" 2>/dev/null || true
  done
  rm -rf "$dir"
}

if [ "$cmd" = down ]; then
  down
  exit 0
fi
[ "$cmd" = up ] || die "unknown command '$cmd' (up or down)"
[ $# -ge 3 ] || die "usage: cluster.sh up DIR N [RATE]"
n=$3 rate=${4:-}
[ "$(id -u)" -eq 0 ] || die "needs root (network and mount namespaces)"
for tool in ip unshare nsenter mpirun; do
  command -v "$tool" >/dev/null || die "needs $tool"
done
[ "$n" -ge 1 ] && [ "$n" -le 8 ] || die "N must be from 1 to 8"

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# Names unique to this fixture, so that fixtures of concurrent runs never meet.
prefix="edb$$x"
echo "$prefix" > "$dir/prefix"
trap 'down' ERR

sw="${prefix}sw"
ip netns add "$sw"
ip -n "$sw" link add br0 type bridge
ip -n "$sw" link set br0 up
printf '127.0.0.1 localhost\n' > "$dir/hosts"
: > "$dir/hostfile"
for k in $(seq 0 $((n - 1))); do
  ns="${prefix}h$k"
  ip netns add "$ns"
  ip link add "${prefix}e$k" type veth peer name "${prefix}p$k"
  ip link set "${prefix}e$k" netns "$ns"
  ip -n "$ns" link set "${prefix}e$k" name eth0
  ip link set "${prefix}p$k" netns "$sw"
  ip -n "$sw" link set "${prefix}p$k" master br0
  ip -n "$sw" link set "${prefix}p$k" up
  ip -n "$ns" addr add "10.231.0.$((k + 1))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  # A lost host is noticed by TCP: mpirun's daemons probe idle links by keepalive (see DIR/mpirun)
  # and give up on unanswered data after tcp_retries2 retransmissions. Linux's 15 (about 15
  # minutes, from a 200 ms timeout doubling each time) would leave mpirun waiting that long to
  # hear from a cut host after a rank aborts the job; 5 makes it about 13 s (0.2 × (2^6 - 1)).
  ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_retries2=5
  if [ -n "$rate" ]; then
    # Both directions shaped: each host's egress, and the switch's egress towards the host.
    tc -n "$ns" qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 100ms
    tc -n "$sw" qdisc add dev "${prefix}p$k" root tbf rate "$rate" burst 256kb latency 100ms
  fi
  printf '10.231.0.%d h%d\n' $((k + 1)) "$k" >> "$dir/hosts"
  printf 'h%d slots=64\n' "$k" >> "$dir/hostfile"
done
for k in $(seq 0 $((n - 1))); do
  ns="${prefix}h$k"
  # The host: its name, the fixture's /etc/hosts, a /tmp of its own. `ip netns exec` and
  # `unshare` both exec, so the background pid is the process that holds the namespaces.
  ip netns exec "$ns" unshare --mount --uts --propagation private sh -c \
    "hostname h$k && mount --bind '$dir/hosts' /etc/hosts && mount -t tmpfs tmpfs /tmp &&
     mkdir -p /tmp/home && exec sleep infinity" </dev/null >/dev/null 2>&1 &
  echo $! > "$dir/h$k.pid"
done

cat > "$dir/on" <<EOF
#!/bin/sh
# on HOST CMD...: runs CMD in HOST's namespaces.
host=\$1; shift
[ -f "$dir/\$host.pid" ] || { echo "no host '\$host' in this cluster" >&2; exit 2; }
exec nsenter -t "\$(cat "$dir/\$host.pid")" -m -u -n -- env HOME=/tmp/home "\$@"
EOF
cat > "$dir/rsh" <<EOF
#!/bin/sh
# OpenMPI's launcher agent: HOST COMMAND... as ssh would run it (one shell line), on HOST.
host=\$1; shift
exec "$dir/on" "\$host" sh -c "\$*"
EOF
# The hosts share this machine's cores: mpirun would bind each host's first rank to core 0, the
# same core, and every message would wait for the scheduler; the ranks are left unbound.
# The daemons notice a lost host by TCP keepalive: probing an idle link after 2 s, every 1 s, 3
# misses. OpenMPI's defaults (300 s, 20 s, 9) leave mpirun waiting 8 minutes for a host whose
# link is cut, long after einsumdb's ranks have given up on it.
cat > "$dir/mpirun" <<EOF
#!/bin/sh
# mpirun ARGS... on h0, across the cluster's hosts, over TCP on their links.
cd /tmp 2>/dev/null || true
exec "$dir/on" h0 env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \\
  OMPI_MCA_plm_rsh_agent="$dir/rsh" OMPI_MCA_btl=tcp,self \\
  OMPI_MCA_btl_tcp_if_include=10.231.0.0/24 OMPI_MCA_oob_tcp_if_include=10.231.0.0/24 \\
  OMPI_MCA_oob_tcp_keepalive_time=2 OMPI_MCA_oob_tcp_keepalive_intvl=1 \\
  OMPI_MCA_oob_tcp_keepalive_probes=3 OMPI_MCA_hwloc_base_binding_policy=none \\
  sh -c 'cd /tmp && exec mpirun --allow-run-as-root --hostfile "$dir/hostfile" "\$@"' mpirun "\$@"
EOF
cat > "$dir/link" <<EOF
#!/bin/sh
# link HOST up|down
exec ip -n "${prefix}\$1" link set eth0 "\$2"
EOF
cat > "$dir/pids" <<EOF
#!/bin/sh
# pids HOST
exec ip netns pids "${prefix}\$1"
EOF
chmod +x "$dir/on" "$dir/rsh" "$dir/mpirun" "$dir/link" "$dir/pids"

# Ready when every host answers on its own address from h0.
for k in $(seq 0 $((n - 1))); do
  for _ in $(seq 100); do
    "$dir/on" "h$k" sh -c "[ \"\$(hostname)\" = h$k ] && [ -d /tmp/home ]" 2>/dev/null && break
    sleep 0.05
  done
  "$dir/on" "h$k" sh -c "[ \"\$(hostname)\" = h$k ]" || die "host h$k did not come up"
done
trap - ERR
echo "$dir"
