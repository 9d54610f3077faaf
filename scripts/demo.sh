#!/usr/bin/env bash
# `make demo`: the catalog, a dry-run plan, and a scenario replayed against the embedded cluster.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
SCENARIO=examples/scenarios/deployment-0-to-200.yaml

echo "== jointer catalog export --region us-east-1 (m5.large) =="
"$BIN/jointer" catalog export --region us-east-1 \
  | "$BIN/python" -c 'import json,sys; c=json.load(sys.stdin); print(len(c["instanceTypes"]), "instance types"); [print(json.dumps(t)) for t in c["instanceTypes"] if t["name"] == "m5.large"]'

echo
echo "== jointer plan -f examples/plan/mixed-web-batch.yaml =="
"$BIN/jointer" plan -f examples/plan/mixed-web-batch.yaml -o table

echo
echo "== jointer simulate $SCENARIO (policy jointer, then greedy) =="
REPORT="$(mktemp -d)"
trap 'rm -rf "$REPORT"' EXIT
"$BIN/jointer" simulate "$SCENARIO" --report "$REPORT/jointer.json"
echo
"$BIN/jointer" simulate "$SCENARIO" --policy greedy --quiet --report "$REPORT/greedy.json"
"$BIN/python" - "$REPORT/jointer.json" "$REPORT/greedy.json" <<'EOF'
import json, sys
jointer, greedy = (json.load(open(path)) for path in sys.argv[1:])
print(
    f"cost over {jointer['durationSeconds'] / 3600:g} virtual hours: "
    f"jointer ${jointer['cost']['total']:.2f}, greedy (Karpenter-style) ${greedy['cost']['total']:.2f}"
)
EOF
