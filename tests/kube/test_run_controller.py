# ruff: noqa: PT018
"""`jointer run` end to end against the kmock API server over HTTP on 127.0.0.1.

The real kubernetes client (through `--kubeconfig`), the real driver, leader election, endpoints
and logs; only the cloud is `FakeCloudProvider`, injected through `Seams`. In-process runs are
stopped with their stop event; one run is a child process stopped with SIGTERM (this module
is its `__main__`). Every wait is on an event (a log line, an election round, a process exit),
never on time.
"""

from __future__ import annotations

import gc
import http.client
import io
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Self

import pytest

from cloudprovider.fake import FakeCloudProvider
from cloudprovider.interruption import DisruptionAction, DisruptionKind, DisruptionRequest
from provisioner.app.cli import build_parser
from provisioner.app.cmd_run import execute
from provisioner.app.wiring import LEASE_NAME, LeaseTimings, Seams
from provisioner.kube.errors import NotFoundError
from provisioner.kube.memory import InMemoryKube
from provisioner.kube.resource import EVENTS, LEASES, NODE_CLAIMS, NODE_POOLS, NODES, PODS
from provisioner.runtime.clock import FakeClock
from provisioner.runtime.collector import LONG_RUN_THRESHOLDS
from tests.interruption_events import INTERRUPTION_EVENTS, SPOT, interruption_events
from tests.kube.kmock_shim import CONTROLLER_TOKEN, EmulatorThread
from tests.unit.controllers.harness import TYPES, nodepool, pending_pod
from tests.unit.controllers.test_nodeclass_controller import FakeLifecycle

REPO = Path(__file__).resolve().parents[2]
WAIT = 30.0  # upper bound of every wait; a healthy run takes a fraction of it
LEASE_NAMESPACE = "kube-system"
FAST_LEASE = LeaseTimings(
    duration=timedelta(seconds=15),
    renew_deadline=timedelta(seconds=10),
    retry_period=timedelta(milliseconds=200),
)
DELETE_IN = timedelta(seconds=5)
"""How long after the interruption message its NodeClaim's latest delete falls."""


def environment(**overrides: str) -> dict[str, str]:
    env = {
        "CLUSTER_NAME": "kmock",
        "LEADER_ELECTION_NAMESPACE": LEASE_NAMESPACE,
        "METRICS_PORT": "0",
        "HEALTH_PROBE_PORT": "0",
        "BATCH_IDLE_DURATION": "100ms",
        "BATCH_MAX_DURATION": "1s",
        "JOINTER_POLICY": "greedy",
        "LOG_FORMAT": "json",
    }
    env.update(overrides)
    return env


def write_kubeconfig(path: Path, url: str) -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "kmock", "cluster": {"server": url}}],
                "users": [{"name": "jointer", "user": {"token": CONTROLLER_TOKEN}}],
                "contexts": [{"name": "kmock", "context": {"cluster": "kmock", "user": "jointer"}}],
                "current-context": "kmock",
            }
        )
    )
    return path


class LogLines(io.StringIO):
    """A log stream whose JSON lines can be awaited."""

    def __init__(self) -> None:
        super().__init__()
        self._cond = threading.Condition()
        self._partial = ""
        self.records: list[dict[str, Any]] = []

    def write(self, text: str) -> int:
        with self._cond:
            self._partial += text
            while "\n" in self._partial:
                line, self._partial = self._partial.split("\n", 1)
                if line.strip():
                    self.records.append(json.loads(line))
            self._cond.notify_all()
        return len(text)

    def flush(self) -> None:
        pass

    def add(self, record: dict[str, Any]) -> None:
        with self._cond:
            self.records.append(record)
            self._cond.notify_all()

    def find(self, message: str) -> list[dict[str, Any]]:
        with self._cond:
            return [r for r in self.records if r.get("message") == message]

    def wait_for(self, message: str) -> dict[str, Any]:
        with self._cond:
            found = self._cond.wait_for(lambda: self.find(message), WAIT)
        assert found, f"no {message!r} in the log: {[r.get('message') for r in self.records]}"
        return found[0]


class Rounds:
    """The election loop's waiting function, counting rounds."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.count = 0

    def __call__(self, delay: float, stop: threading.Event) -> object:
        with self._cond:
            self.count += 1
            self._cond.notify_all()
        return stop.wait(delay)

    def wait_for(self, rounds: int) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self.count >= rounds, WAIT)


class Instance:
    """One `jointer run` in a thread, stopped through its stop event."""

    def __init__(self, kubeconfig: Path, cloud: FakeCloudProvider, identity: str) -> None:
        self.logs = LogLines()
        self.rounds = Rounds()
        self.stop = threading.Event()
        self.status: list[int] = []
        args = build_parser(["run"]).parse_args(["run", "--kubeconfig", str(kubeconfig)])
        seams = Seams(
            cloud=cloud,
            nodeclasses=FakeLifecycle(),  # the EC2NodeClass controller runs (and watches) too
            log_stream=self.logs,
            host="127.0.0.1",
            identity=identity,
            lease=FAST_LEASE,
            watch_timeout=1.0,
            elector_wait=self.rounds,
        )
        self.thread = threading.Thread(
            target=lambda: self.status.append(
                execute(args, environ=environment(), seams=seams, stop=self.stop)
            ),
            name=f"jointer-run-{identity}",
        )

    def __enter__(self) -> Self:
        self.thread.start()
        started = self.logs.wait_for("starting controller")
        self.metrics_port = int(started["metrics-port"])
        self.health_port = int(started["health-probe-port"])
        return self

    def finish(self) -> int:
        self.stop.set()
        self.thread.join(WAIT)
        assert not self.thread.is_alive()
        return self.status[0]

    def __exit__(self, *_: object) -> None:
        if self.thread.is_alive():
            self.finish()


def get(port: int, path: str) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def holder(kube: Any) -> str | None:
    try:
        lease = kube.get(LEASES, LEASE_NAME, namespace=LEASE_NAMESPACE)
    except NotFoundError:
        return None
    return (lease.get("spec") or {}).get("holderIdentity")


def created_total(body: str) -> list[str]:
    return [
        line for line in body.splitlines() if line.startswith("karpenter_nodeclaims_created_total{")
    ]


@pytest.fixture
def kubeconfig(api: EmulatorThread, tmp_path: Path) -> Path:
    return write_kubeconfig(tmp_path / "kubeconfig", api.url)


@pytest.fixture
def cloud() -> FakeCloudProvider:
    return FakeCloudProvider(instance_types=list(TYPES))


def test_run_leads_reconciles_serves_and_hands_over_the_lease(kube, kubeconfig, cloud):
    with Instance(kubeconfig, cloud, "a") as a, Instance(kubeconfig, cloud, "b") as b:
        a.logs.wait_for("successfully acquired lease")
        assert b.rounds.wait_for(3)  # b tried three times while a held the Lease
        assert holder(kube) == "a"
        kube.create(NODE_POOLS, nodepool())
        kube.create(PODS, pending_pod("web-0"), namespace="default")
        created = a.logs.wait_for("created nodeclaim")
        a.logs.wait_for("launched nodeclaim")
        claims = kube.list(NODE_CLAIMS).items
        assert [c["metadata"]["name"] for c in claims] == [created["NodeClaim"]["name"]]
        assert claims[0]["status"]["providerID"].startswith("fake://")
        status, body = get(a.metrics_port, "/metrics")
        assert status == 200
        assert created_total(body) == [
            (
                'karpenter_nodeclaims_created_total{min_values_relaxed="false",'
                'nodepool="default",reason="provisioned"} 1.0'
            )
        ]
        assert get(a.health_port, "/healthz")[0] == 200
        assert get(a.health_port, "/readyz")[0] == 200
        # the standby: alive and Ready (readiness is not leadership), never acted
        assert get(b.health_port, "/healthz")[0] == 200
        assert get(b.health_port, "/readyz") == (200, "ok")
        assert created_total(get(b.metrics_port, "/metrics")[1]) == []
        assert b.logs.find("successfully acquired lease") == []
        assert b.logs.find("starting workers") == []
        assert len(cloud.create_calls) == 1

        assert a.finish() == 0  # the stop event: what SIGTERM sets
        a.logs.wait_for("released lease")
        assert a.logs.find("stopped controller")[0]["in-flight-finished"] is True
        b.logs.wait_for("successfully acquired lease")  # at once, not after the lease expiry
        b.logs.wait_for("starting workers")
        assert holder(kube) == "b"
        # the new leader acts: a new pending pod gets a NodeClaim from b, and b stays Ready
        kube.create(PODS, pending_pod("web-1", cpu="6"), namespace="default")
        taken = b.logs.wait_for("created nodeclaim")
        b.logs.wait_for("launched nodeclaim")
        assert taken["NodeClaim"]["name"] != created["NodeClaim"]["name"]
        assert get(b.health_port, "/readyz") == (200, "ok")
        assert len(created_total(get(b.metrics_port, "/metrics")[1])) == 1
        assert b.finish() == 0
    assert holder(kube) is None
    assert len(kube.list(NODE_CLAIMS).items) == 2
    assert len(cloud.created) == 2


def test_run_without_leader_election_acts_at_once(kube, kubeconfig, cloud):
    args = build_parser(["run"]).parse_args(
        ["run", "--kubeconfig", str(kubeconfig), "--leader-elect", "false"]
    )
    logs, stop, status = LogLines(), threading.Event(), []
    seams = Seams(cloud=cloud, log_stream=logs, host="127.0.0.1", watch_timeout=1.0)
    thread = threading.Thread(
        target=lambda: status.append(execute(args, environ=environment(), seams=seams, stop=stop))
    )
    collector = gc.get_threshold()
    thread.start()
    try:
        logs.wait_for("starting workers")
        # the process's cycle collector is set up for a long run while it serves
        assert gc.get_threshold() == LONG_RUN_THRESHOLDS
        assert gc.get_freeze_count() > 0
        kube.create(NODE_POOLS, nodepool())
        kube.create(PODS, pending_pod("web-0"), namespace="default")
        logs.wait_for("created nodeclaim")
    finally:
        stop.set()
        thread.join(WAIT)
    assert status == [0]
    assert holder(kube) is None  # no Lease was ever created
    assert logs.find("successfully acquired lease") == []
    assert gc.get_threshold() == collector
    assert gc.get_freeze_count() == 0


class QueuedDisruptions:
    """An interruption source fed by the test."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: list[DisruptionRequest] = []

    def send(self, request: DisruptionRequest) -> None:
        with self._lock:
            self._queue.append(request)

    def poll(self) -> list[DisruptionRequest]:
        with self._lock:
            taken, self._queue = self._queue, []
        return taken


def register_node(kube: Any, claim_name: str) -> str:
    """Play the kubelet: the claim's instance joins as a Ready Node."""
    status = kube.get(NODE_CLAIMS, claim_name)["status"]
    name = f"ip-{claim_name}"
    kube.create(
        NODES,
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {"providerID": status["providerID"]},
            "status": {
                "capacity": status["capacity"],
                "allocatable": status["allocatable"],
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
    )
    return name


def metric_line(body: str, name: str, **labels: str) -> str | None:
    """The sample line of ``name`` with exactly ``labels``, or None."""
    rendered = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    prefix = f"{name}{{{rendered}}} "
    return next((line for line in body.splitlines() if line.startswith(prefix)), None)


def test_a_spot_interruption_replaces_first_and_deletes_by_the_deadline(kube, kubeconfig, cloud):
    """`jointer run` takes `jointer simulate`'s path: taint, replacement, delete at the deadline."""
    args = build_parser(["run"]).parse_args(
        ["run", "--kubeconfig", str(kubeconfig), "--leader-elect", "false"]
    )
    logs, stop, status = LogLines(), threading.Event(), []
    disruptions = QueuedDisruptions()
    seams = Seams(
        cloud=cloud,
        disruptions=disruptions,
        log_stream=logs,
        host="127.0.0.1",
        watch_timeout=1.0,
    )
    thread = threading.Thread(
        target=lambda: status.append(execute(args, environ=environment(), seams=seams, stop=stop))
    )
    thread.start()
    try:
        metrics_port = int(logs.wait_for("starting controller")["metrics-port"])
        kube.create(NODE_POOLS, nodepool())
        kube.create(PODS, pending_pod("web-0"), namespace="default")
        launched = logs.wait_for("launched nodeclaim")
        name = launched["NodeClaim"]["name"]
        capacity_type = launched["capacity-type"]
        node = register_node(kube, name)
        logs.wait_for("initialized nodeclaim")
        kube.merge_patch(
            PODS,
            "web-0",
            {"spec": {"nodeName": node}, "status": {"phase": "Running", "conditions": []}},
            namespace="default",
        )
        # the warning came DELETE_IN seconds before the latest delete (2 min - 45 s after it)
        warned = datetime.now(UTC) - timedelta(seconds=75) + DELETE_IN
        disruptions.send(
            DisruptionRequest(
                kind=DisruptionKind.SPOT_INTERRUPTED,
                action=DisruptionAction.CORDON_AND_DRAIN,
                instance_id=launched["provider-id"].rpartition("/")[2],
                nodeclaim=name,
                event_time=warned,
            )
        )
        replacing = logs.wait_for("initiating replacement from interruption message")
        assert replacing["NodeClaim"] == {"name": name}
        assert replacing["replacements"] == 1
        taints = kube.get(NODES, node)["spec"].get("taints") or []
        assert {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"} in taints
        created = [r for r in logs.find("created nodeclaim") if r.get("reason") == SPOT]
        assert [r["controller"] for r in created] == ["interruption"]
        replacement = created[0]["NodeClaim"]["name"]
        assert kube.get(NODE_CLAIMS, name)["metadata"].get("deletionTimestamp") is None
        deleting = logs.wait_for("initiating delete from interruption message")
        assert deleting["NodeClaim"] == {"name": name}
        assert deleting["controller"] == "interruption"
        # the replacement never initialized (no kubelet), so the delete waited for the deadline
        assert datetime.fromisoformat(deleting["time"]) >= warned + timedelta(seconds=75)
        logs.wait_for("deleted nodeclaim")
        body = get(metrics_port, "/metrics")[1]
    finally:
        stop.set()
        thread.join(WAIT)
    assert status == [0]
    assert metric_line(
        body,
        "karpenter_nodeclaims_disrupted_total",
        capacity_type=capacity_type,
        consolidation_policy="",
        nodepool="default",
        reason=SPOT,
        termination_mode="forceful",
    ) == (
        "karpenter_nodeclaims_disrupted_total{capacity_type="
        f'"{capacity_type}",consolidation_policy="",nodepool="default",'
        f'reason="{SPOT}",termination_mode="forceful"}} 1.0'
    )
    created_line = metric_line(
        body,
        "karpenter_nodeclaims_created_total",
        min_values_relaxed="false",
        nodepool="default",
        reason=SPOT,
    )
    assert created_line is not None and created_line.endswith(" 1.0")
    names = [c["metadata"]["name"] for c in kube.list(NODE_CLAIMS).items]
    assert name not in names
    assert replacement in names
    assert launched["provider-id"] not in cloud.created
    seen = (
        (f"{o['kind']}/{o['name']}", e["type"], e["reason"], e["message"])
        for e in kube.list(EVENTS).items
        for o in [e["involvedObject"]]
    )
    assert (
        interruption_events(seen, claim=name, node=node, replacement=replacement)
        == INTERRUPTION_EVENTS
    )


class Ticks:
    """An election wait in virtual time that moves only when the test says so."""

    def __init__(self, clock: FakeClock) -> None:
        self._clock = clock
        self._permits = threading.Semaphore(0)

    def __call__(self, delay: float, stop: threading.Event) -> object:
        self._permits.acquire()
        self._clock.step(timedelta(seconds=delay))
        return stop.is_set()

    def tick(self, rounds: int) -> None:
        for _ in range(rounds):
            self._permits.release()


def test_losing_the_lease_stops_the_controller_with_status_1():
    clock = FakeClock()
    kube = InMemoryKube(clock=clock.now)
    logs, stop, status, ticks = LogLines(), threading.Event(), [], Ticks(clock)
    seams = Seams(
        kube=kube,
        cloud=FakeCloudProvider(instance_types=list(TYPES)),
        clock=clock,
        log_stream=logs,
        host="127.0.0.1",
        identity="a",
        watch_timeout=1.0,
        elector_wait=ticks,
    )
    args = build_parser(["run"]).parse_args(["run"])
    thread = threading.Thread(
        target=lambda: status.append(execute(args, environ=environment(), seams=seams, stop=stop))
    )
    thread.start()
    try:
        logs.wait_for("successfully acquired lease")
        logs.wait_for("starting workers")
        kube.merge_patch(
            LEASES, LEASE_NAME, {"spec": {"holderIdentity": "thief"}}, namespace=LEASE_NAMESPACE
        )
        ticks.tick(6)  # 12 virtual seconds without a renewal: past the 10 s renew deadline
        logs.wait_for("leader election lost")
    finally:
        stop.set()
        ticks.tick(100)
        thread.join(WAIT)
    assert status == [1]
    assert holder(kube) == "thief"
    assert logs.find("released lease") == []


def test_bad_settings_exit_2_naming_the_variable_without_a_traceback():
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    env.update(environment(BATCH_MAX_DURATION="ten"))
    done = subprocess.run(
        [sys.executable, "-m", "provisioner.app.cli", "run"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("jointer run: BATCH_MAX_DURATION: invalid duration 'ten'")
    assert "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1


def test_a_flag_overrides_the_environment_and_is_validated_alike(capsys):
    args = build_parser(["run"]).parse_args(["run", "--batch-idle-duration", "soon"])
    assert execute(args, environ=environment()) == 2
    assert capsys.readouterr().err == (
        "jointer run: BATCH_IDLE_DURATION: invalid duration 'soon' (examples: 1s, 500ms, 1m30s)\n"
    )


def test_missing_cluster_name_is_a_usage_error(capsys):
    args = build_parser(["run"]).parse_args(["run"])
    env = environment()
    del env["CLUSTER_NAME"]
    assert execute(args, environ=env) == 2
    assert "CLUSTER_NAME: required" in capsys.readouterr().err


def test_sigterm_stops_gracefully_releases_the_lease_and_exits_0(kube, kubeconfig):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    env.update(environment())
    logs = LogLines()
    with subprocess.Popen(
        [sys.executable, "-m", "tests.kube.test_run_controller", str(kubeconfig)],
        cwd=REPO,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        reader = threading.Thread(target=_pump, args=(child, logs.add), daemon=True)
        reader.start()
        try:
            logs.wait_for("successfully acquired lease")
            kube.create(NODE_POOLS, nodepool())
            kube.create(PODS, pending_pod("web-0"), namespace="default")
            logs.wait_for("launched nodeclaim")
            assert holder(kube) == "sigterm"
            child.send_signal(signal.SIGTERM)
            assert child.wait(WAIT) == 0
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(WAIT)
            reader.join(WAIT)
    logs.wait_for("released lease")
    assert logs.find("stopped controller")[0]["in-flight-finished"] is True
    assert holder(kube) is None
    assert len(kube.list(NODE_CLAIMS).items) == 1


def _pump(child: subprocess.Popen[str], add: Callable[[dict[str, Any]], None]) -> None:
    assert child.stderr is not None
    for line in _lines(child.stderr):
        try:
            add(json.loads(line))
        except ValueError:
            add({"message": line})


def _lines(stream: io.TextIOBase | Any) -> Iterator[str]:
    for line in stream:
        if line.strip():
            yield line.rstrip("\n")


def _child_main(kubeconfig: str) -> int:
    """`jointer run` as the CLI runs it, with the fake cloud (SIGTERM handled for real)."""
    args = build_parser(["run"]).parse_args(["run", "--kubeconfig", kubeconfig])
    seams = Seams(
        cloud=FakeCloudProvider(instance_types=list(TYPES)),
        host="127.0.0.1",
        identity="sigterm",
        lease=FAST_LEASE,
        watch_timeout=1.0,
    )
    return execute(args, environ=os.environ, seams=seams)


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1]))
