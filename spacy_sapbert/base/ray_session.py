"""Ray for the scale-out back-ends (``link-corpus --backend ray``, ``build-index --ray``): the optional
import (E700 names the ``[ray]`` extra), joining a cluster or starting a local Ray (E701 when the
address cannot be reached), and turning a failed Ray job back into the coded error behind it.

Importing :mod:`spacy_sapbert` never imports Ray; these functions do, when called.
"""
from __future__ import annotations

import contextlib
import re
import socket
from typing import Any, Iterator, Optional
from urllib.parse import urlparse

from .. import errors
from ..errors import ConfigError, Errors, SapbertError, Warnings
from .util import get_logger

logger = get_logger("ray")
CONNECT_TIMEOUT_S = 5.0


def import_ray(what: str) -> Any:
    """``ray`` with ``ray.data`` loaded, or E700 (``what`` names the feature that needs it)."""
    try:
        import ray  # lazy: ray
        import ray.data  # noqa: F401
    except ImportError as err:  # also a broken install (pyarrow built for another numpy)
        raise ConfigError(Errors.E700.format(what=what, reason=err)) from None
    return ray


def check_address(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """E701 unless something listens at ``HOST:PORT`` / ``ray://HOST:PORT`` (``auto`` is left to Ray)."""
    if address == "auto":
        return
    parsed = urlparse(address if "://" in address else f"tcp://{address}")
    try:
        host, port = parsed.hostname, parsed.port
    except ValueError as err:
        raise ConfigError(Errors.E701.format(address=address, reason=err)) from None
    if not host or port is None:
        raise ConfigError(Errors.E701.format(address=address, reason="expected HOST:PORT or ray://HOST:PORT"))
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as err:
        raise ConfigError(Errors.E701.format(address=address, reason=err.strerror or err)) from None


@contextlib.contextmanager
def ray_session(what: str, *, address: Optional[str] = None, num_cpus: Optional[int] = None,
                show_progress: bool = False) -> Iterator[Any]:
    """Yield ``ray`` connected: to ``address`` (``auto``, ``HOST:PORT``, ``ray://HOST:PORT``), else to a
    local Ray started here with ``num_cpus`` and no dashboard. A Ray already started in this process is
    used as it is (W700 when an address was given); one started here is shut down at the end."""
    ray = import_ray(what)
    if address:
        check_address(address)
    started = False
    if ray.is_initialized():
        if address:
            logger.warning(Warnings.W700.format(current=ray.get_runtime_context().gcs_address, address=address))
    else:
        try:
            if address:
                ray.init(address=address, include_dashboard=False, log_to_driver=False)
            else:
                ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError, OSError) as err:
            raise ConfigError(Errors.E701.format(address=address or "local", reason=str(err)[:300])) from None
        started = True
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = show_progress
    try:
        yield ray
    finally:
        if started:
            ray.shutdown()


def reraise_job_error(err: BaseException, what: str) -> None:
    """Raise the coded error an actor raised (found in the exception chain), else E709."""
    seen = set()
    current: Optional[BaseException] = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, SapbertError):
            raise current.__class__(str(current)) from None
        cause = getattr(current, "cause", None)
        current = cause if isinstance(cause, BaseException) else (current.__cause__ or current.__context__)
    # Ray sends an actor's exception back as text (RayTaskError(UserCodeException)): find ours in it
    found = re.findall(r"spacy_sapbert\.errors\.(\w+): (\[SB-E\d{3}\][^\n]*)", str(err))
    if found:
        name, message = found[-1]
        cls = getattr(errors, name, None)
        if isinstance(cls, type) and issubclass(cls, SapbertError):
            raise cls(message) from None
    raise ConfigError(Errors.E709.format(what=what, reason=str(err).strip().splitlines()[-1][:300] if str(err)
                                         else type(err).__name__)) from None


__all__ = ["import_ray", "check_address", "ray_session", "reraise_job_error"]
