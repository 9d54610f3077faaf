#!/usr/bin/env bash
# `make demo`: show the instance catalog Jointer builds for us-east-1.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
echo "== jointer catalog export --region us-east-1 (m5.large and g5.xlarge) =="
"$BIN/jointer" catalog export --region us-east-1 \
  | "$BIN/python" -c 'import json,sys; c=json.load(sys.stdin); print(len(c["instanceTypes"]), "instance types"); [print(json.dumps(t, indent=1)) for t in c["instanceTypes"] if t["name"] in ("m5.large","g5.xlarge")]'
