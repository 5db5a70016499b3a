# Copyright 2026 rog_ros maintainers. Licensed under the Apache License, Version 2.0.
"""Actions: what a sans-I/O engine asks its driver (simulator or node) to do."""

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Send:
    """Put ``msg`` on the wire to ``dest`` (a worker rank or messages.SERVER)."""

    dest: int
    msg: Any


@dataclass(frozen=True)
class StartCompute:
    """Worker: run the next forward/backward pass (after idling ``sleep_s``), then call
    ``engine.on_compute_done(grads, now)``. ``clock`` is the iteration about to be computed."""

    clock: int
    sleep_s: float = 0.0


@dataclass(frozen=True)
class Log:
    """A metric or event for telemetry: ``name`` with ``value`` for ``worker`` (-1: server)."""

    name: str
    value: float = 0.0
    worker: int = -1
    info: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Stopped:
    """The engine has finished (server: training over; worker: told to stop)."""

    reason: str = ''
