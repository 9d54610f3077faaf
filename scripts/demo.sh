#!/usr/bin/env bash
# `make demo`: the instance catalog Jointer builds for us-east-1, then a plan for a KAI gang
# with fractional GPUs next to an over-quota pod group.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
echo "== jointer catalog export --region us-east-1 (m5.large and g5.xlarge) =="
"$BIN/jointer" catalog export --region us-east-1 \
  | "$BIN/python" -c 'import json,sys; c=json.load(sys.stdin); print(len(c["instanceTypes"]), "instance types"); [print(t["name"], "allocatable", json.dumps(t["allocatable"])) for t in c["instanceTypes"] if t["name"] in ("m5.large","g5.xlarge")]'
echo
echo "== jointer plan -f examples/plan/runai-gang-fractions.yaml -o table =="
"$BIN/jointer" plan -f examples/plan/runai-gang-fractions.yaml -o table --time-limit 3
