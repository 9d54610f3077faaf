"""A shim over kmock 0.8's `KubernetesEmulator` that makes it answer like a real API server.

Pinned to kmock==0.8 (it uses kmock internals: `_objects`, `_buses`, `_lock`, `_handle`).
Adds: uid/resourceVersion/generation/creationTimestamp stamping and `generateName` on create
(201); resourceVersion preconditions (409) and bumps on PATCH, PUT (replace) and DELETE;
`status` subresource patches that touch only `status`; DELETE preconditions and finalizers;
`pods/eviction` (PDB-checked with `provisioner.kube.pdb`, then delete); label selectors on
lists and watches; watches from a resourceVersion that replay what changed after it, deletions
included (the live objects changed since, then the deletions since, then the bus, with the snapshot
and the bus subscription taken under one lock so nothing falls between two watches);
`/version/` and `/apis/`; and `expire_next_watch()` (the next watch answers 410 Expired).

Authorization, as the API server does it: a request carrying the controller's bearer token
(`CONTROLLER_TOKEN`, the kubeconfig `jointer run` is given) is mapped to its RBAC attributes
(`access_request`: verb, group, resource/subresource, namespace, name, as
`k8s.io/apiserver`'s `RequestInfoFactory` does) and handed to `authorize`, which raises
`ForbiddenError` to deny: the answer is then the API server's 403 Status. Requests without the
token (the test's own client, playing kubelet and users) are not checked. Non-resource URLs
(`/version/`, `/apis/`) are not checked either (`system:discovery` grants them to everyone).
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import json
import threading
import uuid
import warnings
from collections.abc import Callable
from typing import Any, Final

import aiohttp.web
import attrs
from kmock import KubernetesEmulator, Server, resource
from kmock._internal import apps, enums, rendering
from kmock._internal.k8s import KubernetesError

from provisioner.kube import pdb
from provisioner.kube.errors import ForbiddenError, KubeApiError
from provisioner.kube.patch import apply_merge_patch
from provisioner.kube.rbac import AccessRequest
from provisioner.kube.selector import parse_label_selector

KARPENTER_CRDS = {
    "karpenter.sh/v1/nodepools": "NodePool",
    "karpenter.sh/v1/nodeclaims": "NodeClaim",
    "karpenter.sh/v1alpha1/nodeoverlays": "NodeOverlay",
    "karpenter.k8s.aws/v1/ec2nodeclasses": "EC2NodeClass",
}


CONTROLLER_TOKEN: Final = "jointer-controller"  # noqa: S105 - a test server's, not a secret
"""The bearer token of the controller's ServiceAccount; its requests are authorized."""

Authorize = Callable[[AccessRequest], None]
"""Decides one request: returns to allow, raises `ForbiddenError` to deny."""

_VERBS: Final = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def access_request(request: rendering.Request) -> AccessRequest | None:
    """The RBAC attributes of a resource request (`None` for non-resource URLs).

    As the API server's `RequestInfoFactory`: GET of a name is `get`; GET of a collection is
    `list`, or `watch` with `?watch=true`, named by an exact `metadata.name` field selector;
    POST `create`, PUT `update`, PATCH `patch`, DELETE `delete` (of a collection:
    `deletecollection`); subresources (`status`, `eviction`, `binding`) keep the verb.
    """
    if request.resource is None:
        return None
    method = request.method.value.upper()
    name = request.name
    if method in {"GET", "HEAD"}:
        if name:
            verb = "get"
        else:
            verb = "watch" if request.params.get("watch") in {"true", "1"} else "list"
            name = _exact_name(request.params.get("fieldSelector"))
    elif method == "DELETE" and not name:
        verb = "deletecollection"
    else:
        verb = _VERBS.get(method, method.lower())
    return AccessRequest(
        verb=verb,
        group=request.resource.group or "",
        resource=request.resource.plural or "",
        subresource=request.subresource or "",
        namespace=request.namespace,
        name=name,
    )


def _exact_name(field_selector: str | None) -> str | None:
    for term in (field_selector or "").split(","):
        key, op, value = term.partition("=")
        if op and key.strip() == "metadata.name":
            return value.lstrip("=").strip() or None
    return None


def _bearer(request: rendering.Request) -> str | None:
    for key, value in request.headers.items():
        if key.lower() == "authorization" and value.startswith("Bearer "):
            return value.removeprefix("Bearer ").strip()
    return None


def _now() -> str:
    return dt.datetime.now(tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _error(code: int, reason: str, message: str) -> KubernetesError:
    return KubernetesError(status=code, reason=reason, message=message, details={})


@attrs.define(kw_only=True)
class ShimEmulator(KubernetesEmulator):
    """`KubernetesEmulator` with the real API's metadata and concurrency semantics."""

    authorize: Authorize | None = None
    _rv: int = attrs.field(default=0, init=False)
    _expire_next: set[str] = attrs.field(factory=set, init=False)
    _tombstones: list[tuple[Any, dict[str, Any]]] = attrs.field(factory=list, init=False)
    """Every DELETED event so far, in resourceVersion order, for watches that resume."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.fallback["get /version/"] << self._serve_server_version
        self.fallback["get /apis/"] << self._serve_apis
        with warnings.catch_warnings():  # kmock 0.8 uses importlib.resources.read_binary
            warnings.simplefilter("ignore", DeprecationWarning)
            self.resources.load_bundled()
        for path, kind in KARPENTER_CRDS.items():
            self.resources[path] = {
                "kind": kind,
                "namespaced": False,
                "singular": kind.lower(),
                "verbs": ["get", "list", "watch", "create", "patch", "delete"],
                "shortnames": [],
                "categories": [],
                "subresources": ["status"],
            }

    def expire_next_watch(self, plural: str) -> None:
        """Make the next watch of `plural` answer with an ERROR 410 Expired event."""
        self._expire_next.add(plural)

    def _next_rv(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _key(self, request: rendering.Request, name: str | None = None) -> Any:
        return (request.resource, request.namespace, name or request.name)

    def _current(self, key: Any) -> dict[str, Any]:
        objects: Any = self._objects
        obj = objects[key] if key in objects else None  # noqa: SIM401 - ObjectsArray has no .get
        if obj is None or obj.deleted:
            raise _error(404, "NotFound", f"{key[2]!r} not found")
        raw: dict[str, Any] = obj.raw
        return raw

    def _authorize(self, request: rendering.Request) -> None:
        """Raise the API server's 403 when the controller's request is not allowed."""
        access = access_request(request)
        if self.authorize is None or access is None or _bearer(request) != CONTROLLER_TOKEN:
            return
        try:
            self.authorize(access)
        except ForbiddenError as error:
            # StatusDetails' fields are `omitempty`: no `group` for the core group.
            details = {key: value for key, value in error.details.items() if value}
            raise KubernetesError(
                status=403, reason="Forbidden", message=error.message, details=details
            ) from error

    async def _handle(self, request: rendering.Request) -> aiohttp.web.StreamResponse:
        if request.resource is None:
            return await super()._handle(request)
        self._authorize(request)
        method = request.method
        async with self._lock:
            if method == enums.method.POST and request.name is None:
                await self._create(request)
            elif method == enums.method.PATCH and request.name:
                await self._patch(request)
            elif method == enums.method.PUT and request.name:
                return aiohttp.web.json_response(await self._replace(request))
            elif method == enums.method.DELETE and request.name:
                return aiohttp.web.json_response(
                    await self._delete(self._key(request), request.data)
                )
            elif method == enums.method.POST and request.subresource == "eviction":
                return aiohttp.web.json_response(await self._evict(request), status=201)
        # Reactions (fault injection) and kmock's fallbacks answer from the stored state.
        return await apps.RawHandler._handle(self, request)

    async def _create(self, request: rendering.Request) -> None:
        body = request.data
        meta = body.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if request.namespace:
            meta["namespace"] = request.namespace
        key: Any = (request.resource, request.namespace, meta.get("name"))
        objects: Any = self._objects
        if key in objects and not objects[key].deleted:
            raise _error(409, "AlreadyExists", f"{meta.get('name')!r} already exists")
        meta.update(
            uid=str(uuid.uuid4()),
            resourceVersion=self._next_rv(),
            generation=1,
            creationTimestamp=_now(),
        )
        if key in objects:
            objects[key].create(body)
        else:
            objects[key] = body
        await self._buses[key[0]].put({"type": "ADDED", "object": copy.deepcopy(body)})

    async def _patch(self, request: rendering.Request) -> None:
        key = self._key(request)
        current = self._current(key)
        patch = request.data or {}
        if request.subresource == "status":
            patch = {"status": patch.get("status"), "metadata": patch.get("metadata") or {}}
        wanted = (patch.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"].get("resourceVersion"):
            raise _error(409, "Conflict", "the object has been modified; please apply your changes")
        updated = apply_merge_patch(current, patch)
        meta = updated["metadata"]
        for field in ("uid", "creationTimestamp", "generation", "deletionTimestamp"):
            if field in current["metadata"]:
                meta[field] = current["metadata"][field]
        if {k: v for k, v in updated.items() if k not in {"metadata", "status"}} != {
            k: v for k, v in current.items() if k not in {"metadata", "status"}
        }:
            meta["generation"] = int(current["metadata"].get("generation") or 0) + 1
        meta["resourceVersion"] = self._next_rv()
        await self._store(key, updated)

    async def _store(self, key: Any, updated: dict[str, Any]) -> None:
        meta = updated["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._objects[key].create(updated)
            self._objects[key].delete()
            self._tombstones.append((key[0], {"type": "DELETED", "object": copy.deepcopy(updated)}))
            event = "DELETED"
        else:
            self._objects[key].create(updated)
            event = "MODIFIED"
        await self._buses[key[0]].put({"type": event, "object": copy.deepcopy(updated)})

    async def _replace(self, request: rendering.Request) -> dict[str, Any]:
        key = self._key(request)
        current = self._current(key)
        body: dict[str, Any] = copy.deepcopy(request.data)
        wanted = body.get("metadata", {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise _error(409, "Conflict", "the object has been modified; please apply your changes")
        body["metadata"] = {**current["metadata"], **body.get("metadata", {})}
        body["metadata"]["resourceVersion"] = self._next_rv()
        await self._store(key, body)
        return body

    async def _delete(self, key: Any, options: Any) -> dict[str, Any]:
        current = self._current(key)
        preconditions = (options or {}).get("preconditions") or {}
        for field in ("uid", "resourceVersion"):
            if preconditions.get(field) and preconditions[field] != current["metadata"].get(field):
                raise _error(409, "Conflict", f"Precondition failed: {field}")
        updated = copy.deepcopy(current)
        if current["metadata"].get("finalizers"):
            if current["metadata"].get("deletionTimestamp"):
                return current
            updated["metadata"]["deletionTimestamp"] = _now()
        else:
            updated["metadata"]["deletionTimestamp"] = _now()
        updated["metadata"]["resourceVersion"] = self._next_rv()
        await self._store(key, updated)
        return updated

    async def _evict(self, request: rendering.Request) -> dict[str, Any]:
        key = self._key(request)
        pod = self._current(key)
        pods = [
            o.raw
            for (res, _, _), o in self._objects.items()
            if res == request.resource and not o.deleted
        ]
        pdb_resource = resource("policy", "v1", "poddisruptionbudgets")
        pdbs = [
            o.raw
            for (res, _, _), o in self._objects.items()
            if res == pdb_resource and not o.deleted
        ]
        try:
            pdb.check_eviction(pod, pdbs, pods)
        except KubeApiError as error:
            raise _error(error.code, error.reason, error.message) from error
        await self._delete(key, (request.data or {}).get("deleteOptions"))
        return {"apiVersion": "v1", "kind": "Status", "status": "Success", "code": 201}

    async def _serve_create(self, request: rendering.Request) -> rendering.Payload:
        return rendering.Response(status=201, payload=await super()._serve_create(request))

    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        answer = await super()._serve_list(request)
        assert isinstance(answer, dict)
        selector = parse_label_selector(request.params.get("labelSelector"))
        answer["items"] = [
            i for i in answer["items"] if selector.matches(i.get("metadata", {}).get("labels"))
        ]
        answer["metadata"] = {"resourceVersion": str(self._rv)}
        return answer

    async def _serve_watch(self, request: rendering.Request) -> Any:
        """Resume from `?resourceVersion`: what changed after it (deletions too), then the bus.

        kmock's own watch takes its snapshot and joins the bus at different moments and never
        replays deletions, so a change between two watch requests could be lost for good.
        """
        assert request.resource is not None
        yield b""  # the headers go out at once, as the API server sends them
        if request.resource.plural in self._expire_next:
            self._expire_next.discard(request.resource.plural)
            yield {
                "type": "ERROR",
                "object": {
                    "kind": "Status",
                    "code": 410,
                    "reason": "Expired",
                    "message": "too old",
                },
            }
            return
        selector = parse_label_selector(request.params.get("labelSelector"))
        since = int(request.params.get("resourceVersion") or 0)

        def wanted(event: dict[str, Any]) -> bool:
            meta = event.get("object", {}).get("metadata", {})
            return (
                (request.namespace is None or meta.get("namespace") == request.namespace)
                and (request.name is None or meta.get("name") == request.name)
                and int(meta.get("resourceVersion") or 0) > since
                and selector.matches(meta.get("labels"))
            )

        bus = self._buses[request.resource]
        async with self._lock:
            marker = await bus.mark()
            backlog = [
                {"type": "ADDED", "object": copy.deepcopy(o.raw)}
                for (res, _, _), o in self._objects.items()
                if res == request.resource and not o.deleted
            ]
            if since:
                backlog += [e for res, e in self._tombstones if res == request.resource]
        try:
            for event in sorted(backlog, key=_event_rv):
                if wanted(event):
                    yield event
            async for event in bus.stream(since=marker):
                if isinstance(event, dict) and wanted(event):
                    yield event
        finally:
            await bus.unmark(marker)


class EmulatorThread:
    """Runs a `ShimEmulator` and its HTTP server in an event loop on a background thread.

    The server can be stopped and started again on the same port (the objects survive).
    """

    def __init__(self, authorize: Authorize | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.emulator = ShimEmulator(authorize=authorize)
        self.port: int | None = None
        self._server: Server | None = None
        self._run(self.emulator.__aenter__())
        self.start()

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        server = Server(self.emulator, port=self.port)
        self._run(server.__aenter__())
        self._server, self.port = server, server.port

    def stop(self) -> None:
        if self._server is not None:
            self._run(self._server.__aexit__(None, None, None))
            self._server = None

    def close(self) -> None:
        self.stop()
        self._run(self.emulator.__aexit__(None, None, None))

        async def drain() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self._run(drain())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
        self.loop.close()

    def call(self, fn: Any) -> Any:
        """Run a plain function on the emulator's loop (to touch its state safely)."""

        async def wrapper() -> Any:
            return fn()

        return self._run(wrapper())


def _event_rv(event: dict[str, Any]) -> int:
    return int(event.get("object", {}).get("metadata", {}).get("resourceVersion") or 0)


def dumps(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True)
