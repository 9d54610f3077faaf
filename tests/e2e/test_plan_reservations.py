"""`jointer plan` with a capacity reservation in the catalog (the example of examples/plan)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cloudprovider.aws.catalog import read_catalog
from provisioner.app.cli import main
from tests.plancheck import check_plan

PLAN = Path(__file__).resolve().parents[2] / "examples" / "plan"
EXAMPLE = PLAN / "gang-on-reservation.yaml"
CATALOG = PLAN / "catalogs" / "p5-with-odcr.json"
RESERVATION = "cr-0a1b2c3d4e5f60001"


def test_plan_places_the_gang_whole_on_the_odcr(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["plan", "-f", str(EXAMPLE), "--catalog", str(CATALOG), "--time-limit", "1"]
    status = main([*argv, "-o", "json"])
    out, err = capsys.readouterr()
    assert status == 0, err
    document = json.loads(out)
    claims = document["nodeClaims"]
    assert [(c["capacityType"], c["zone"], c["capacityReservationID"]) for c in claims] == [
        ("reserved", "us-east-1a", RESERVATION)
    ] * 2
    assert sorted(p for c in claims for p in c["pods"]) == [
        f"research/pretrain-{i}" for i in range(8)
    ]
    objects = [d for d in yaml.safe_load_all(EXAMPLE.read_text(encoding="utf-8")) if d]
    catalog = read_catalog(json.loads(CATALOG.read_text(encoding="utf-8")))
    assert check_plan(objects, catalog, document) == []


def test_a_reserved_offering_needs_its_reservation_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(CATALOG.read_text(encoding="utf-8"))
    reserved = data["instanceTypes"][0]["offerings"][-1]
    assert reserved["capacityType"] == "reserved"
    del reserved["reservationID"]
    broken = tmp_path / "catalog.json"
    broken.write_text(json.dumps(data), encoding="utf-8")
    status = main(["plan", "-f", str(EXAMPLE), "--catalog", str(broken), "--time-limit", "1"])
    _, err = capsys.readouterr()
    assert status != 0
    assert "offerings[3]: reservationID: required for a reserved offering" in err
    assert "Traceback" not in err
