#!/usr/bin/env bash
# `make demo`: the catalog, a dry-run plan, a scenario replayed against the embedded cluster under
# both policies, and the HTML report of the comparison (out/report.html).
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
echo "== jointer simulate $SCENARIO --compare greedy =="
REPORT="$(mktemp -d)"
trap 'rm -rf "$REPORT"' EXIT
"$BIN/jointer" simulate "$SCENARIO" --compare greedy --report "$REPORT/comparison.json"

echo
echo "== jointer report (charts over virtual time, both policies) =="
mkdir -p out
"$BIN/jointer" report "$REPORT/comparison.json" -o out/report.html >/dev/null
echo "wrote $(pwd)/out/report.html"
