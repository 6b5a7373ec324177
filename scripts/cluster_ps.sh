#!/usr/bin/env bash
# `make cluster-ps`: each worker of a compose cluster with its address, whether it was granted
# NET_ADMIN, and its link as `tc -s qdisc` in it shows it: the tbf's rate under shaped links
# (docs/shaped-links.md), else the default queue ("unshaped"), and what went through it.
#   scripts/cluster_ps.sh PROJECT [DEVICE]      (DEVICE: eth0, the cluster network's)
set -euo pipefail
project=${1:?usage: cluster_ps.sh PROJECT [DEVICE]}
dev=${2:-eth0}
mapfile -t workers < <(docker ps -a --filter "label=com.docker.compose.project=$project" \
  --filter label=com.docker.compose.service=worker \
  --format '{{.Label "com.docker.compose.container-number"}} {{.Names}}' | sort -n | cut -d' ' -f2)
if [ ${#workers[@]} -eq 0 ]; then
  echo "cluster-ps: no workers in cluster $project (make cluster-up CLUSTER=$project)" >&2
  exit 1
fi
printf '%-24s %-15s %-9s %-10s %s\n' worker address NET_ADMIN rate "qdisc on $dev"
for w in "${workers[@]}"; do
  state=$(docker inspect -f '{{.State.Status}}' "$w")
  addr=$(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$w")
  caps=$(docker inspect -f '{{join .HostConfig.CapAdd " "}}' "$w")
  admin=no
  [[ " $caps " == *NET_ADMIN* ]] && admin=yes
  if [ "$state" != running ]; then
    printf '%-24s %-15s %-9s %-10s %s\n' "$w" "${addr:--}" "$admin" - "($state)"
    continue
  fi
  # qdisc tbf 8001: root refcnt 2 rate 400Mbit burst 500000b lat 20ms
  #  Sent 1234 bytes 12 pkt (dropped 0, overlimits 3 requeues 0)
  docker exec "$w" tc -s qdisc show dev "$dev" | awk -v w="$w" -v a="$addr" -v n="$admin" '
    /^qdisc/ && / root / && !kind {
      kind = $2; rate = (kind ~ /^(noqueue|pfifo_fast|fq_codel|mq)$/) ? "unshaped" : "-"
      for (i = 3; i < NF; i++) {
        if ($i == "rate") rate = $(i + 1)
        if ($i == "burst" || $i == "lat" || $i == "latency") opts = opts " " $i " " $(i + 1)
      }
      root = 1; next
    }
    root && /Sent/ { sent = $2; drops = $7; sub(/,/, "", drops); root = 0 }
    END {
      if (!kind) { kind = "?"; rate = "?" }
      printf "%-24s %-15s %-9s %-10s %s%s; sent %.1f MB, %d dropped\n", w, a, n, rate, kind, opts,
        sent / 1e6, drops
    }'
done
