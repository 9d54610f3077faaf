"""Regenerate ``cloudprovider/aws/data/on-demand-prices.csv`` from the AWS Pricing API.

Uses Karpenter's GetProducts filters (``cloudprovider.aws.pricing.fetch_on_demand_prices``) for
every region already in the table (or those given), with the caller's AWS credentials. Regions
that return nothing (for example GovCloud, which the commercial Pricing API does not serve) keep
their current rows.

Run: ``.venv/bin/python scripts/generate_prices.py [REGION ...]``
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path
from typing import cast

import boto3

from cloudprovider.aws.pricing import (
    PricingClient,
    fetch_on_demand_prices,
    iter_price_rows,
    load_on_demand_table,
    pricing_endpoint_region,
)

OUTPUT = Path(__file__).resolve().parent.parent / "cloudprovider/aws/data/on-demand-prices.csv"


def main(argv: list[str]) -> int:
    """Fetch prices for the regions and rewrite the table."""
    table = load_on_demand_table(OUTPUT.read_text(encoding="utf-8"))
    for region in argv or sorted(table):
        client = cast(
            "PricingClient",
            boto3.client("pricing", region_name=pricing_endpoint_region(region)),
        )
        prices = fetch_on_demand_prices(client, region)
        if prices:
            table[region] = prices
        print(f"{region}: {len(prices)} prices", file=sys.stderr)
    with OUTPUT.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["region", "instance_type", "on_demand_usd_per_hour"])
        writer.writerows(iter_price_rows(table))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
