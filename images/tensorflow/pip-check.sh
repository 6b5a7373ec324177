#!/bin/bash
# `pip check` that accepts exactly one known report: tf-keras requires the `tensorflow`
# distribution, and the CPU images hold the same package as `tensorflow-cpu` (tf-keras is
# installed without dependencies; images/tensorflow/Dockerfile). Anything else fails.
set -euo pipefail
problems=$(pip check 2>&1 || true)
left=$(grep -v -x -e "No broken requirements found." \
  -e "tf-keras ${TF_KERAS_VERSION:-} requires tensorflow, which is not installed." <<<"$problems" || true)
if [[ -n $left ]]; then
  echo "pip check: $left" >&2
  exit 1
fi
echo "pip check: consistent${TF_KERAS_VERSION:+ (tf-keras installed without its tensorflow requirement)}"
