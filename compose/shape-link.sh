#!/bin/sh
# A worker's start under compose/compose.shaped.yaml (docs/shaped-links.md): shape this worker's
# cluster interface (tc tbf: what it sends) to its rate, then start sshd through the image's
# entrypoint with NET_ADMIN dropped from every process it starts. sshd comes up (the healthcheck)
# only after the shaping, so no job ever runs on an unshaped link and none can change it.
#   HOROVOD_LINK_RATE     every worker's rate, in tc's units (400mbit, 1gbit, 50mbps)
#   HOROVOD_LINK_RATES    workers' own rates by index: "2=200mbit,3=1gbit" (wins over the above)
#   HOROVOD_LINK_BURST    tbf's bucket (default: 10 ms at the rate, at least 32 KiB)
#   HOROVOD_LINK_LATENCY  the longest a packet may queue before it is dropped (default 20ms)
#   HOROVOD_LINK_DEVICE   the interface (default eth0: the cluster network is the only one)
set -eu
say() { echo "horovod link: $*"; }
fail() {
  say "$*" >&2
  exit 1
}

dev=${HOROVOD_LINK_DEVICE:-eth0}
rate=${HOROVOD_LINK_RATE:-}
# Compose's replicas are identical: the index is in the container's name (<project>-worker-N),
# which Docker's DNS gives back for the container's address (a PTR record).
addr=$(ip -o -4 addr show dev "$dev" | awk '{ split($4, a, "/"); print a[1]; exit }')
name=
for _ in 1 2 3 4 5; do
  name=$(getent -s dns hosts "$addr" | awk '{ print $2; exit }') && [ -n "$name" ] && break
  [ -n "${HOROVOD_LINK_RATES:-}" ] || break # the name is only needed for its index
  sleep 1
done
me=${name%%.*}
index=${me##*-}
if [ -n "${HOROVOD_LINK_RATES:-}" ]; then
  case $index in
    '' | *[!0-9]*) fail "no worker index for $addr from Docker's DNS ('$name'): HOROVOD_LINK_RATES needs one" ;;
  esac
  for entry in $(echo "$HOROVOD_LINK_RATES" | tr ',' ' '); do
    key=${entry%%=*}
    case $key in '' | *[!0-9]*) key= ;; esac
    [ -n "$key" ] && [ "$key" != "$entry" ] && [ -n "${entry#*=}" ] ||
      fail "HOROVOD_LINK_RATES: '$entry' is not <worker index>=<rate>"
    [ "$key" = "$index" ] && rate=${entry#*=}
  done
elif [ -z "$rate" ]; then
  fail "compose.shaped.yaml needs HOROVOD_LINK_RATE or HOROVOD_LINK_RATES"
fi

if [ -n "$rate" ]; then
  # tbf's bucket must hold what the rate sends in one timer tick (rate/HZ); 10 ms covers HZ 100,
  # the coarsest kernels use. 32 KiB keeps low rates from dropping whole GSO bursts.
  burst=${HOROVOD_LINK_BURST:-$(echo "$rate" | awk '{
    n = $0; sub(/[a-zA-Z]+$/, "", n); u = tolower(substr($0, length(n) + 1))
    split("bit kbit mbit gbit tbit kibit mibit gibit tibit", bits, " ")
    split("bps kbps mbps gbps tbps kibps mibps gibps tibps", bytes, " ")
    split("1 1e3 1e6 1e9 1e12 1024 1048576 1073741824 1099511627776", f, " ")
    if (u == "") u = "bit"
    for (i = 1; i <= 9; i++) {
      if (u == bits[i]) m = f[i] / 8
      if (u == bytes[i]) m = f[i]
    }
    if (n !~ /^[0-9]+(\.[0-9]+)?$/ || !m) exit 1
    b = n * m / 100; printf "%.0f\n", (b < 32768 ? 32768 : b)
  }')} || fail "cannot read rate '$rate' (tc's units: 400mbit, 1gbit, 50mbps)"
  latency=${HOROVOD_LINK_LATENCY:-20ms}
  tc qdisc replace dev "$dev" root tbf rate "$rate" burst "$burst" latency "$latency" ||
    fail "tc on $dev failed (rate $rate burst $burst latency $latency)"
  say "${me:-$(hostname)} $dev: $(tc qdisc show dev "$dev" | head -1)"
else
  say "${me:-$(hostname)} $dev: not shaped (no rate of its own in HOROVOD_LINK_RATES, no HOROVOD_LINK_RATE)"
fi
exec setpriv --bounding-set -net_admin --inh-caps -net_admin \
  /usr/local/bin/docker-entrypoint.sh "$@"
