"""`RealKube`: the `KubeClient` port over the official `kubernetes` client.

The only module that imports the `kubernetes` library. It uses the raw `ApiClient`
(`param_serialize` + `call_api`) with JSON bodies, so one code path serves every `Resource`,
built-in or custom; responses are decoded as plain dicts. Failures become the errors of
`provisioner.kube.errors`: HTTP answers by their `Status`, transport failures as
`UnreachableError` (the client library's exception chained as the cause).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Final, Self

import orjson
import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.watch.watch import iter_resp_lines

from provisioner.kube.errors import KubeApiError, UnreachableError, from_status
from provisioner.kube.event import record_event
from provisioner.kube.protocol import (
    EventType,
    JsonObject,
    ObjectList,
    WatchEvent,
    WatchEventType,
)
from provisioner.kube.ratelimit import TokenBucket
from provisioner.kube.resource import PODS, Resource
from provisioner.kube.selector import parse_field_selector

MERGE_PATCH: Final = "application/merge-patch+json"
JSON: Final = "application/json"
DEFAULT_REQUEST_TIMEOUT: Final = 30.0
"""Seconds for a non-watch request (connect and read)."""


def _utcnow() -> datetime:
    return datetime.now(UTC)


CONNECTION_POOL_SIZE: Final = 64


def load_config(kubeconfig: str | None = None) -> k8s_client.ApiClient:
    """Build an `ApiClient` from a kubeconfig file, or in-cluster config.

    Args:
        kubeconfig: a kubeconfig path; `None` uses the in-cluster service account when running
            in a pod (`KUBERNETES_SERVICE_HOST` set), else `$KUBECONFIG` / `~/.kube/config`.

    Returns:
        A client the caller closes (or hands to `RealKube`, which closes it).
    """
    configuration = k8s_client.Configuration()
    if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        k8s_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, client_configuration=configuration
        )
    # one connection per open watch (about fifteen informers) plus workers and the Lease
    configuration.connection_pool_maxsize = CONNECTION_POOL_SIZE
    return k8s_client.ApiClient(configuration)


def _decode(data: bytes | None) -> Any:
    if not data:
        return {}
    try:
        return orjson.loads(data)
    except ValueError:
        return {"message": data.decode("utf-8", errors="replace")}


class RealKube:
    """`KubeClient` over an `ApiClient`.

    Args:
        api_client: configured client (see `load_config`); closed by `close()`.
        clock: the current time, for event timestamps.
        request_timeout: seconds for non-watch requests.
        limiter: the client-side rate limit (``KUBE_CLIENT_QPS``/``KUBE_CLIENT_BURST``);
            every request, a watch's included, takes a token. None: unlimited.
    """

    def __init__(
        self,
        api_client: k8s_client.ApiClient,
        *,
        clock: Callable[[], datetime] = _utcnow,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        limiter: TokenBucket | None = None,
    ) -> None:
        self._api = api_client
        self._clock = clock
        self._timeout = request_timeout
        self._limiter = limiter

    @classmethod
    def from_config(
        cls, kubeconfig: str | None = None, *, limiter: TokenBucket | None = None
    ) -> Self:
        """Connect with `load_config(kubeconfig)`."""
        return cls(load_config(kubeconfig), limiter=limiter)

    def close(self) -> None:
        """Close the connection pool."""
        self._api.close()  # type: ignore[no-untyped-call]
        self._api.rest_client.pool_manager.clear()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- transport ---------------------------------------------------------------------------

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: float | tuple[float, float] | None = None,
    ) -> Any:
        if self._limiter is not None:
            self._limiter.acquire()
        headers = {"Accept": JSON}
        if body is not None:
            headers["Content-Type"] = content_type
        request = self._api.param_serialize(
            method=method,
            resource_path=path,
            query_params=[(k, v) for k, v in (query or {}).items() if v is not None],
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        try:
            response = self._api.call_api(*request, _request_timeout=timeout or self._timeout)
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise UnreachableError(f"{method} {path}: {error}", reason="Unreachable") from error
        except k8s_client.ApiException as error:
            raise _from_api_exception(error) from error
        return response

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
    ) -> Any:
        response = self._send(method, path, query=query, body=body, content_type=content_type)
        try:
            data = response.read()
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise UnreachableError(f"{method} {path}: {error}", reason="Unreachable") from error
        decoded = _decode(data)
        if not 200 <= response.status <= 299:  # noqa: PLR2004 - the 2xx range
            raise from_status(decoded if isinstance(decoded, dict) else {}, code=response.status)
        return decoded

    # -- KubeClient --------------------------------------------------------------------------

    def get(self, resource: Resource, name: str, *, namespace: str | None = None) -> JsonObject:
        """Read one object (see `KubeClient.get`)."""
        obj: JsonObject = self._call("GET", resource.path(namespace=namespace, name=name))
        return _with_kind(resource, obj)

    def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        """List objects (see `KubeClient.list`); the field selector is also applied locally."""
        answer = self._call(
            "GET",
            resource.path(namespace=namespace),
            query={"labelSelector": label_selector, "fieldSelector": field_selector},
        )
        fields = parse_field_selector(field_selector)
        items = [_with_kind(resource, item) for item in answer.get("items") or []]
        return ObjectList(
            items=[item for item in items if fields.matches(item)],
            resource_version=str((answer.get("metadata") or {}).get("resourceVersion") or ""),
        )

    def list_pages(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        limit: int = 500,
    ) -> Iterator[ObjectList]:
        """List in chunks of ``limit`` objects (the API's ``limit``/``continue``), one at a time.

        Only one chunk is decoded at once (client-go's pager does the same for an informer's
        list); every chunk carries the list's resourceVersion. A server that does not chunk
        answers with one page. An expired ``continue`` token raises ``GoneError``.
        """
        token: str | None = None
        while True:
            answer = self._call(
                "GET",
                resource.path(namespace=namespace),
                query={"labelSelector": label_selector, "limit": limit, "continue": token},
            )
            metadata = answer.get("metadata") or {}
            yield ObjectList(
                items=[_with_kind(resource, item) for item in answer.get("items") or []],
                resource_version=str(metadata.get("resourceVersion") or ""),
            )
            token = metadata.get("continue") or None
            if token is None:
                return

    def watch(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        timeout: float | None = None,
    ) -> Iterator[WatchEvent]:
        """Stream changes (see `KubeClient.watch`).

        The server is asked to close the stream after `timeout` seconds, and the client stops
        reading after `timeout` seconds without data; either ends the iterator normally.
        """
        query: dict[str, Any] = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version or None,
            "labelSelector": label_selector,
            "timeoutSeconds": None if timeout is None else max(1, int(timeout)),
        }
        read_timeout = timeout if timeout is not None else None
        response = self._send(
            "GET",
            resource.path(namespace=namespace),
            query=query,
            timeout=(self._timeout, read_timeout) if read_timeout else None,
        )
        return self._stream(resource, response)

    def _stream(self, resource: Resource, response: Any) -> Iterator[WatchEvent]:
        raw = response.response
        try:
            if not 200 <= response.status <= 299:  # noqa: PLR2004 - the 2xx range
                decoded = _decode(raw.data)
                raise from_status(
                    decoded if isinstance(decoded, dict) else {}, code=response.status
                )
            for line in iter_resp_lines(raw):  # type: ignore[no-untyped-call]
                event = orjson.loads(line)
                kind = str(event.get("type", ""))
                obj = event.get("object") or {}
                if kind == "ERROR":
                    raise from_status(obj)
                if kind not in WatchEventType.__members__:
                    continue
                yield WatchEvent(WatchEventType(kind), _with_kind(resource, obj))
        except (urllib3.exceptions.ReadTimeoutError, TimeoutError):
            return
        except urllib3.exceptions.ProtocolError as error:
            if _is_read_timeout(error):
                return
            raise UnreachableError(f"watch {resource}: {error}", reason="Unreachable") from error
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise UnreachableError(f"watch {resource}: {error}", reason="Unreachable") from error
        finally:
            raw.release_conn()
            raw.close()

    def create(
        self, resource: Resource, body: Mapping[str, Any], *, namespace: str | None = None
    ) -> JsonObject:
        """Create an object (see `KubeClient.create`)."""
        namespace = namespace or (body.get("metadata") or {}).get("namespace")
        payload = {"apiVersion": resource.api_version, "kind": resource.kind, **body}
        obj: JsonObject = self._call("POST", resource.path(namespace=namespace), body=payload)
        return _with_kind(resource, obj)

    def merge_patch(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
    ) -> JsonObject:
        """Apply a JSON merge patch (see `KubeClient.merge_patch`)."""
        return self._patch(resource, name, patch, namespace, resource_version, None)

    def patch_status(
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
    ) -> JsonObject:
        """Merge-patch the status subresource (see `KubeClient.patch_status`)."""
        body = {"status": patch["status"]} if "status" in patch else {}
        return self._patch(resource, name, body, namespace, resource_version, "status")

    def _patch(  # noqa: PLR0917 - private, two call sites
        self,
        resource: Resource,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None,
        resource_version: str | None,
        subresource: str | None,
    ) -> JsonObject:
        body: dict[str, Any] = dict(patch)
        if resource_version is not None:
            metadata = dict(body.get("metadata") or {})
            metadata["resourceVersion"] = resource_version
            body["metadata"] = metadata
        obj: JsonObject = self._call(
            "PATCH",
            resource.path(namespace=namespace, name=name, subresource=subresource),
            body=body,
            content_type=MERGE_PATCH,
        )
        return _with_kind(resource, obj)

    def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        uid: str | None = None,
        resource_version: str | None = None,
        grace_period_seconds: int | None = None,
    ) -> None:
        """Delete an object (see `KubeClient.delete`)."""
        self._call(
            "DELETE",
            resource.path(namespace=namespace, name=name),
            body=_delete_options(uid, resource_version, grace_period_seconds),
        )

    def evict(self, namespace: str, name: str, *, uid: str | None = None) -> None:
        """Evict a pod through `policy/v1` Eviction (see `KubeClient.evict`)."""
        eviction = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": _delete_options(uid, None, None),
        }
        self._call(
            "POST", PODS.path(namespace=namespace, name=name, subresource="eviction"), body=eviction
        )

    def create_event(
        self,
        involved: Mapping[str, Any],
        *,
        reason: str,
        message: str,
        type: EventType = "Normal",  # noqa: A002 - the API's own field name
        component: str = "karpenter",
    ) -> JsonObject:
        """Record an Event (see `KubeClient.create_event`)."""
        return record_event(
            self,
            involved,
            reason=reason,
            message=message,
            type=type,
            component=component,
            now=self._clock(),
        )


def _delete_options(
    uid: str | None, resource_version: str | None, grace_period_seconds: int | None
) -> JsonObject:
    options: JsonObject = {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "propagationPolicy": "Background",
    }
    preconditions = {
        key: value
        for key, value in (("uid", uid), ("resourceVersion", resource_version))
        if value is not None
    }
    if preconditions:
        options["preconditions"] = preconditions
    if grace_period_seconds is not None:
        options["gracePeriodSeconds"] = grace_period_seconds
    return options


def _with_kind(resource: Resource, obj: JsonObject) -> JsonObject:
    """Items of a list come without `apiVersion`/`kind`; put them back."""
    if not obj.get("kind"):
        obj["apiVersion"] = resource.api_version
        obj["kind"] = resource.kind
    return obj


def _is_read_timeout(error: urllib3.exceptions.ProtocolError) -> bool:
    return any(
        isinstance(arg, urllib3.exceptions.ReadTimeoutError | TimeoutError) for arg in error.args
    )


def _from_api_exception(error: k8s_client.ApiException) -> KubeApiError:
    decoded = _decode(error.body.encode() if isinstance(error.body, str) else error.body)
    status = decoded if isinstance(decoded, dict) else {}
    return from_status(status, code=int(error.status or 500))
