"""The controller's HTTP endpoints: ``/metrics``, ``/healthz`` and ``/readyz``.

Karpenter serves Prometheus metrics on ``METRICS_PORT`` (8080) and the probes on
``HEALTH_PROBE_PORT`` (8081); the Helm chart points its liveness probe at ``/healthz`` and its
readiness probe at ``/readyz``. :class:`Endpoints` starts one small threaded HTTP server per
port (one for both when the ports are equal):

* ``/metrics``: the injected ``CollectorRegistry`` in the Prometheus text format (or
  OpenMetrics when the scraper asks for it).
* ``/healthz``: 200 while the process serves requests.
* ``/readyz``: 200 when every readiness check passes, else 503 naming the failing ones, in
  controller-runtime's ``[+]name ok`` / ``[-]name failed`` format. The controller process
  (``provisioner.app.wiring.ControllerProcess``) has one check, ``informers``: as in
  Karpenter, readiness is not leadership, so a standby replica is Ready (rollouts and drains of
  the chart's 2 replicas under its PDB complete); the leader is Ready once its informers synced.

Port 0 picks a free port (read it back from :attr:`Endpoints.metrics_port` and
:attr:`Endpoints.health_port`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Final, Self

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

__all__ = ["DEFAULT_BIND_ADDRESS", "Check", "Endpoints", "Response", "Route"]

DEFAULT_BIND_ADDRESS: Final = "0.0.0.0"  # noqa: S104 - probes and scrapes come from outside the pod
_TEXT: Final = "text/plain; charset=utf-8"
_POLL_SECONDS: Final = 0.1


@dataclass(frozen=True, slots=True)
class Response:
    """What a route answers."""

    status: int
    body: bytes
    content_type: str = _TEXT


Route = Callable[[Mapping[str, str]], Response]
"""A handler: request headers -> response."""
Check = Callable[[], bool]
"""A readiness check: whether this part is ready."""


def metrics_route(registry: CollectorRegistry) -> Route:
    """``/metrics``: the registry's exposition, format negotiated from ``Accept``."""

    def serve(headers: Mapping[str, str]) -> Response:
        encoder, content_type = choose_encoder(headers.get("Accept", ""))
        return Response(HTTPStatus.OK, encoder(registry), content_type)

    return serve


def health_route(_headers: Mapping[str, str]) -> Response:
    """``/healthz``: the process is alive and serving."""
    return Response(HTTPStatus.OK, b"ok")


def checks_route(checks: Mapping[str, Check]) -> Route:
    """``/readyz``: 200 when every check passes, else 503 with the failing ones marked."""

    def serve(_headers: Mapping[str, str]) -> Response:
        results = {name: _passes(check) for name, check in checks.items()}
        if all(results.values()):
            return Response(HTTPStatus.OK, b"ok")
        lines = [
            f"[{'+' if ok else '-'}]{name} {'ok' if ok else 'failed'}"
            for name, ok in results.items()
        ]
        lines.append("readyz check failed")
        return Response(HTTPStatus.SERVICE_UNAVAILABLE, ("\n".join(lines) + "\n").encode())

    return serve


def _passes(check: Check) -> bool:
    try:
        return bool(check())
    except Exception:  # noqa: BLE001 - a check that fails to answer is a failing check
        return False


def _handler_class(routes: Mapping[str, Route]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "jointer"
        sys_version = ""

        def do_GET(self) -> None:
            route = routes.get(self.path.partition("?")[0].rstrip("/") or "/")
            if route is None:
                response = Response(HTTPStatus.NOT_FOUND, b"not found\n")
            else:
                response = route(dict(self.headers.items()))
            self.send_response(response.status)
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(response.body)))
            self.end_headers()
            self.wfile.write(response.body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's name
            del format, args  # probes every few seconds would flood the controller's log

    return Handler


class _Server:
    def __init__(self, host: str, port: int, routes: Mapping[str, Route]) -> None:
        self._http = ThreadingHTTPServer((host, port), _handler_class(routes))
        self._http.daemon_threads = True
        self._thread = threading.Thread(
            target=self._http.serve_forever,
            kwargs={"poll_interval": _POLL_SECONDS},
            name=f"http-{self.port}",
            daemon=True,
        )

    @property
    def port(self) -> int:
        return int(self._http.server_address[1])

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():
            self._http.shutdown()
            self._thread.join()
        self._http.server_close()


class Endpoints:
    """The metrics and probe servers.

    Args:
        registry: exposed at ``/metrics``.
        readiness: the checks of ``/readyz``, by name.
        metrics_port: the port of ``/metrics`` (0: any free port).
        health_port: the port of ``/healthz`` and ``/readyz`` (0: any free port).
        host: the address to bind.

    Raises:
        OSError: a port cannot be bound.
    """

    def __init__(
        self,
        *,
        registry: CollectorRegistry,
        readiness: Mapping[str, Check],
        metrics_port: int,
        health_port: int,
        host: str = DEFAULT_BIND_ADDRESS,
    ) -> None:
        metrics: dict[str, Route] = {"/metrics": metrics_route(registry)}
        health: dict[str, Route] = {"/healthz": health_route, "/readyz": checks_route(readiness)}
        if metrics_port == health_port and metrics_port != 0:
            self._servers = [_Server(host, metrics_port, {**metrics, **health})]
            self._metrics, self._health = self._servers[0], self._servers[0]
        else:
            self._metrics = _Server(host, metrics_port, metrics)
            try:
                self._health = _Server(host, health_port, health)
            except OSError:
                self._metrics.stop()
                raise
            self._servers = [self._metrics, self._health]
        self._started = False

    @property
    def metrics_port(self) -> int:
        """The bound port of ``/metrics``."""
        return self._metrics.port

    @property
    def health_port(self) -> int:
        """The bound port of ``/healthz`` and ``/readyz``."""
        return self._health.port

    def start(self) -> None:
        """Serve in background threads."""
        if not self._started:
            self._started = True
            for server in self._servers:
                server.start()

    def stop(self) -> None:
        """Stop serving and close the sockets."""
        for server in self._servers:
            server.stop()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()
