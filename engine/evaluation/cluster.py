"""Reaching a Ray cluster: the address (``--ray-address``, ``ray.address`` in
slotwise.yaml, ``RAY_ADDRESS``), the job's ``runtime_env`` (``--runtime-env FILE``,
``ray.runtime_env``), and a named error with the address and the fix when the cluster
cannot be reached or refuses the driver (Ray itself retries an unreachable address for
minutes, then raises an error that names neither). Runtime env files are read by
:mod:`engine.io.runtime_env`."""

from __future__ import annotations

import os
import re
import socket
from typing import Any
from urllib.parse import urlsplit

from engine.errors import ClusterError, SlotwiseError

__all__ = ["CONNECT_TIMEOUT", "connect", "fetch", "task_failure"]

#: Seconds the driver waits for the head's port before it says it cannot reach it.
CONNECT_TIMEOUT = 5.0
#: The ports Ray listens on when the address gives none: Ray Client's, the GCS's.
_DEFAULT_PORTS = {"ray": 10001, "": 6379}
#: How a worker's failed import reads in a task's error.
_MISSING_MODULE = re.compile(r"No module named '([^']+)'")
#: The fix named with each kind of failure.
_FIXES = {
    "unreachable": "start the cluster (`ray start --head` on the head node) or give its "
    "address: --ray-address HOST:6379 on a node of it, ray://HOST:10001 from outside "
    "(Ray Client), or `ray.address` in slotwise.yaml, or RAY_ADDRESS",
    "auto": "'auto' joins the cluster `ray start` started on this machine: start one, or "
    "give the head's address",
    "auth": "the cluster requires a token: set RAY_AUTH_MODE=token and RAY_AUTH_TOKEN (or "
    "RAY_AUTH_TOKEN_PATH, or ~/.ray/auth_token) to the cluster's token (`ray "
    "get-auth-token` on the head prints it)",
    "import": "install slotwise and every metric plugin the job names on every node, or "
    "ship them with the job: --runtime-env FILE with a working_dir of their unpacked wheels "
    "(docs/scale.md, 'Shipping slotwise and plugins')",
    "remote": "a worker does not see this shell's environment: give the workers the "
    "endpoint and credentials in --runtime-env's env_vars (AWS_ENDPOINT_URL, "
    "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION), or the endpoint in the "
    "URI (s3://BUCKET/PATH?endpoint_override=HOST:PORT&scheme=http)",
    "read": "every worker node reads the inputs itself, at the same path: put them on a "
    "filesystem every node mounts there, or at a URI every node can read",
    "refused": "check the address, that the head runs the same Ray and Python versions as "
    "this driver, and the head's logs (/tmp/ray/session_latest/logs)",
}


def connect(ray: Any, address: str | None, **options: Any) -> str:
    """``ray.init`` at ``address`` (else ``RAY_ADDRESS``, else a local instance it
    starts), after checking the head answers; returns the address it joined ("local" for
    an instance of its own). Raises :class:`ClusterError` naming the address and the fix."""
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address == "auto":
        _joinable_here()
    elif address not in (None, "local"):
        _answers(address)
    try:
        ray.init(address=address, **options)
    except Exception as error:  # Ray raises ConnectionError, RuntimeError, gRPC errors
        text = f"{type(error).__name__}: {error}"
        kind = "auth" if _is_auth(text) else "refused"
        reason = f"refused the driver ({_first_line(text)})"
        raise ClusterError(address or "local", reason, _FIXES[kind]) from error
    return address or "local"


def _joinable_here() -> None:
    """``auto`` needs a cluster started on this machine (Ray reads its address from
    /tmp/ray/ray_current_cluster): without one, say so rather than start nothing."""
    from ray._private.utils import read_ray_address

    if not read_ray_address():
        raise ClusterError("auto", "none was started on this machine", _FIXES["auto"])


def _answers(address: str) -> None:
    """A TCP connection to the head's port within :data:`CONNECT_TIMEOUT`."""
    parts = urlsplit(address if "://" in address else f"//{address}")
    host, port = parts.hostname, parts.port or _DEFAULT_PORTS.get(parts.scheme, 6379)
    if not host:
        raise ClusterError(address, "not an address (HOST:PORT or ray://HOST:PORT)", "")
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT):
            pass
    except OSError as error:
        if isinstance(error, TimeoutError):
            reason = f"{host}:{port}: no answer within {CONNECT_TIMEOUT:g} s"
            reason = f"cannot reach it ({reason})"
        else:
            reason = f"{host}:{port}: {error.strerror or error}"
        reason = f"cannot reach it ({reason})"
        raise ClusterError(address, reason, _FIXES["unreachable"]) from None


def _is_auth(text: str) -> bool:
    lowered = text.lower()
    return any(word in lowered for word in ("unauthenticated", "auth token", "authentication"))


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def task_failure(ray: Any, error: Exception) -> Exception:
    """What a failed Ray task raises here: a slotwise error raised in the task as itself;
    a worker that cannot import slotwise or a plugin (the nodes lack them) as a
    :class:`ClusterError` naming the module and the fix; anything else unchanged."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, SlotwiseError):
        return cause
    address = ray.get_runtime_context().gcs_address if ray.is_initialized() else "?"
    missing = _MISSING_MODULE.search(str(error))
    if missing is not None:
        reason = f"its workers cannot import {missing.group(1)!r}"
        return ClusterError(address, reason, _FIXES["import"])
    if isinstance(cause, OSError):  # a shard the worker cannot reach or read
        remote = any(word in str(cause) for word in ("AWS", "S3", "s3://", "GCS", "gs://"))
        fix = _FIXES["remote" if remote else "read"]
        return ClusterError(address, f"a worker cannot read its input ({cause})", fix)
    return error


def fetch(ray: Any, refs: Any) -> Any:
    """``ray.get``, a failed task's error as :func:`task_failure` says."""
    try:
        return ray.get(refs)
    except ray.exceptions.RayTaskError as error:
        found = task_failure(ray, error)
        if found is error:
            raise
        raise found from None
