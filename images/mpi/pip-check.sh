#!/bin/bash
# `pip check` that accepts exactly the reports a layer above declared, and nothing else: each
# layer that installs a package without some of its requirements on purpose writes the very lines
# pip will print into /etc/pip-check.d/<layer> (tensorflow: tf-keras's `tensorflow` requirement,
# filled by tensorflow-cpu; torch: the CUDA wheels that stand-ins or the cuda layer replace).
# Every accepted line is printed, so a build log names them all.
set -euo pipefail
problems=$(pip check 2>&1 || true)
accepted=$(cat /etc/pip-check.d/* 2>/dev/null || true)
left=$(grep -v -x -F -e "No broken requirements found." ${accepted:+-e "$accepted"} <<<"$problems" || true)
if [[ -n $left ]]; then
  echo "pip check: $left" >&2
  exit 1
fi
known=$(grep -x -F ${accepted:+-e "$accepted"} -e "No broken requirements found." <<<"$problems" | grep -v -x "No broken requirements found." || true)
if [[ -n $known ]]; then
  echo "pip check: consistent, except what /etc/pip-check.d accepts:"
  sed 's/^/  accepted: /' <<<"$known"
else
  echo "pip check: consistent"
fi
