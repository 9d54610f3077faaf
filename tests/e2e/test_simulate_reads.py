"""The simulated account's kept EC2 answers: moto's answers, until EC2 changes."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from provisioner.simulation.cloud import MotoCloud
from provisioner.simulation.motoreads import ReadCache, ReadMismatchError, ec2_action
from provisioner.simulation.timeline import Timeline
from tests.e2e.conftest import bundled, run
from tests.e2e.fleets import fleet
from tests.e2e.test_simulate_account import REGION, ZONES

pytestmark = pytest.mark.usefixtures("test_catalog")

RUNNING = [{"Name": "instance-state-name", "Values": ["pending", "running"]}]


@pytest.fixture
def checked() -> Iterator[MotoCloud]:
    """An account whose every kept answer is compared with moto's own."""
    cloud = MotoCloud(
        timeline=Timeline(), region=REGION, cluster="demo", zones=ZONES, seed=7, check_reads=True
    )
    cloud.start()
    try:
        yield cloud
    finally:
        cloud.stop()


def _reads(cloud: MotoCloud) -> ReadCache:
    assert cloud.reads is not None
    return cloud.reads


def _running(cloud: MotoCloud) -> set[str]:
    answer = cloud.client("ec2").describe_instances(Filters=RUNNING)
    return {i["InstanceId"] for r in answer["Reservations"] for i in r["Instances"]}


def test_a_repeated_read_is_answered_from_the_kept_answer(checked: MotoCloud) -> None:
    ec2 = checked.client("ec2")
    first = ec2.describe_subnets()
    hits = _reads(checked).hits
    second = ec2.describe_subnets()
    assert _reads(checked).hits == hits + 1
    assert second["Subnets"] == first["Subnets"]
    # a request id is drawn for each answer, as moto draws one
    ids = {a["ResponseMetadata"]["HTTPHeaders"]["x-amzn-requestid"] for a in (first, second)}
    assert len(ids) == 2
    assert _reads(checked).mismatches == []


def test_launches_terminations_and_tags_are_seen_by_the_next_read(checked: MotoCloud) -> None:
    assert _running(checked) == set()
    assert _running(checked) == set()
    launched = fleet(checked, "on-demand", "m5.large")["Instances"][0]["InstanceIds"][0]
    assert _running(checked) == {launched}
    ec2 = checked.client("ec2")
    tagged = [{"Name": "tag:team", "Values": ["a"]}]
    assert ec2.describe_instances(Filters=tagged)["Reservations"] == []
    ec2.create_tags(Resources=[launched], Tags=[{"Key": "team", "Value": "a"}])
    assert len(ec2.describe_instances(Filters=tagged)["Reservations"]) == 1
    ec2.terminate_instances(InstanceIds=[launched])
    assert _running(checked) == set()
    assert _reads(checked).hits > 0
    assert _reads(checked).mismatches == []


def test_a_faded_instance_leaves_the_kept_answers(checked: MotoCloud) -> None:
    launched = fleet(checked, "on-demand", "m5.large")["Instances"][0]["InstanceIds"][0]
    checked.client("ec2").terminate_instances(InstanceIds=[launched])
    ec2 = checked.client("ec2")
    everyone = ec2.describe_instances()
    assert [i["InstanceId"] for r in everyone["Reservations"] for i in r["Instances"]] == [launched]
    checked.timeline.run_until(checked.timeline.now + 3601)
    assert ec2.describe_instances()["Reservations"] == []
    assert _reads(checked).mismatches == []


def test_other_services_pass_through_and_keep_the_ec2_answers(checked: MotoCloud) -> None:
    ec2 = checked.client("ec2")
    ec2.describe_security_groups()
    checked.client("sqs").receive_message(QueueUrl=checked.queue_url, WaitTimeSeconds=0)
    hits = _reads(checked).hits
    ec2.describe_security_groups()
    assert _reads(checked).hits == hits + 1


def _request(body: str, host: str = "ec2.us-east-1.amazonaws.com") -> Any:
    return SimpleNamespace(url=f"https://{host}/", body=body.encode())


def test_only_ec2_query_requests_have_an_action() -> None:
    assert ec2_action(_request("Action=DescribeInstances&Version=2016-11-15")) == (
        "DescribeInstances"
    )
    assert ec2_action(_request("Action=CreateFleet")) == "CreateFleet"
    assert ec2_action(_request("Action=ReceiveMessage", host="sqs.us-east-1.amazonaws.com")) is None
    assert ec2_action(_request(json.dumps({"Name": "x"}))) is None


def test_checking_catches_an_answer_that_changed_without_an_ec2_change() -> None:
    answers = iter(["<a>1</a>", "<a>2</a>"])

    def answer(_: Any) -> tuple[int, dict[str, Any], Any]:
        return 200, {}, next(answers)

    reads = ReadCache(answer, check=True)
    request = _request("Action=DescribeInstances")
    reads(request)
    with pytest.raises(ReadMismatchError):
        reads(request)
    assert len(reads.mismatches) == 1


def test_a_change_between_reads_asks_moto_again() -> None:
    calls: list[str] = []

    def answer(request: Any) -> tuple[int, dict[str, Any], Any]:
        calls.append(request.body.decode())
        return 200, {}, f"<n>{len(calls)}</n>"

    reads = ReadCache(answer)
    describe = _request("Action=DescribeInstances")
    reads(describe)
    reads(describe)
    reads(_request("Action=TerminateInstances&InstanceId.1=i-1"))
    assert reads(describe) is not None
    assert calls == [
        "Action=DescribeInstances",
        "Action=TerminateInstances&InstanceId.1=i-1",
        "Action=DescribeInstances",
    ]


def _report_without_timing(report: dict[str, Any]) -> str:
    report = dict(report)
    report.pop("wallSeconds", None)
    return json.dumps(report, sort_keys=True, default=str)


def test_a_scenario_runs_the_same_with_kept_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spot interruptions, an outage and replacements: every kept answer is moto's (and
    botocore's), and the run (ids included: the request ids are drawn as moto draws them) is
    the one without any kept answer."""
    scenario = bundled("spot-outage")
    seen: list[ReadCache] = []
    start = MotoCloud.start

    def watched(check: bool) -> Callable[[MotoCloud], None]:
        def watched_start(cloud: MotoCloud) -> None:
            cloud._check_reads = check
            start(cloud)
            seen.append(_reads(cloud))

        return watched_start

    monkeypatch.setattr(MotoCloud, "start", watched(check=True))
    checked, _ = run(scenario)
    monkeypatch.setattr(MotoCloud, "start", watched(check=False))
    kept, _ = run(scenario)
    assert seen[0].hits > 0
    assert seen[0].mismatches == []
    assert seen[1].parsed_hits > 0
    monkeypatch.setattr(ReadCache, "__call__", lambda reads, request: reads._answer(request))
    monkeypatch.setattr(ReadCache, "parsed", lambda reads, key: None)
    asked, _ = run(scenario)
    assert seen[2].hits == seen[2].parsed_hits == 0
    assert _report_without_timing(kept) == _report_without_timing(asked)
    assert _report_without_timing(checked) == _report_without_timing(asked)


def test_parsed_answers_are_copies_kept_until_ec2_changes() -> None:
    reads = ReadCache(lambda request: (200, {}, "<ok/>"))
    key = ("DescribeSubnets", "https://ec2/", (("Action", "DescribeSubnets"),))
    assert reads.parsed(key) is None
    reads.keep_parsed(key, {"Subnets": [{"SubnetId": "s-1"}], "ResponseMetadata": {}})
    first = reads.parsed(key)
    assert first is not None
    assert first["Subnets"] == [{"SubnetId": "s-1"}]
    first["Subnets"].append({"SubnetId": "s-2"})  # a caller's change stays its own
    second = reads.parsed(key)
    assert second is not None
    assert second["Subnets"] == [{"SubnetId": "s-1"}]
    assert first["ResponseMetadata"]["RequestId"] != second["ResponseMetadata"]["RequestId"]
    reads(_request("Action=CreateTags&ResourceId.1=s-1"))
    assert reads.parsed(key) is None


def test_checking_catches_a_parsed_answer_that_changed() -> None:
    reads = ReadCache(lambda request: (200, {}, "<ok/>"), check=True)
    key = ("DescribeSubnets", "https://ec2/", ())
    reads.keep_parsed(key, {"Subnets": [], "ResponseMetadata": {"RequestId": "a"}})
    assert reads.parsed(key) is None  # checking: always asked afresh
    reads.keep_parsed(key, {"Subnets": [], "ResponseMetadata": {"RequestId": "b"}})
    with pytest.raises(ReadMismatchError):
        reads.keep_parsed(key, {"Subnets": [{"SubnetId": "s-1"}], "ResponseMetadata": {}})
