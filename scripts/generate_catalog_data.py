"""Regenerate ``cloudprovider/aws/data/ec2-instance-types.json.gz`` from EC2 (moto's copy).

Starts moto's server on 127.0.0.1 (random port), calls the real boto3 DescribeInstanceTypes and
DescribeInstanceTypeOfferings for every region of the built-in price table that moto knows,
and stores the fields Jointer reads as compact, gzip-compressed JSON::

    {"source": ..., "instanceTypes": [{...DescribeInstanceTypes entry...}],
     "offerings": {"us-east-1": {"m5.large": ["us-east-1a", ...]}}}

Run: ``.venv/bin/python scripts/generate_catalog_data.py``
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import sys
from importlib.metadata import version
from pathlib import Path
from typing import cast

import boto3
from moto.server import ThreadedMotoServer

from cloudprovider.aws.catalog import (
    Ec2InstanceTypeClient,
    describe_instance_types,
    describe_zone_offerings,
)
from cloudprovider.aws.pricing import regions_with_prices

OUTPUT = (
    Path(__file__).resolve().parent.parent / "cloudprovider/aws/data/ec2-instance-types.json.gz"
)


def main() -> int:
    """Generate the data file and print its size."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ[key] = "testing"
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        infos: dict[str, dict[str, object]] = {}
        offerings: dict[str, dict[str, list[str]]] = {}
        for region in sorted(regions_with_prices()):
            client = cast(
                "Ec2InstanceTypeClient",
                boto3.client("ec2", region_name=region, endpoint_url=endpoint),
            )
            zones = describe_zone_offerings(client)
            if not zones:
                print(f"{region}: moto has no instance type offerings, skipped", file=sys.stderr)
                continue
            offerings[region] = zones
            if not infos:
                for info in describe_instance_types(client):
                    infos[str(info["InstanceType"])] = info
            print(f"{region}: {len(zones)} offered types", file=sys.stderr)
    finally:
        server.stop()
    data = {
        "source": f"moto {version('moto')} DescribeInstanceTypes/DescribeInstanceTypeOfferings",
        "instanceTypes": [infos[name] for name in sorted(infos)],
        "offerings": offerings,
    }
    text = json.dumps(data, separators=(",", ":"), sort_keys=True).encode()
    OUTPUT.write_bytes(gzip.compress(text, compresslevel=9, mtime=0))
    print(f"wrote {OUTPUT} ({OUTPUT.stat().st_size} bytes, {len(infos)} types)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
