# Copyright 2026 rog_ros maintainers. Licensed under the Apache License, Version 2.0.
"""Synchronisation systems as policies of one engine pair: ``make_policy('rog:4')``."""

from rog_ros.protocol.policies.base import SyncPolicy, layout_for
from rog_ros.protocol.policies.bsp import bsp
from rog_ros.protocol.policies.flown import flown
from rog_ros.protocol.policies.rog import rog
from rog_ros.protocol.policies.ssp import ssp

FACTORIES = {'bsp': bsp, 'ssp': ssp, 'rog': rog, 'flown': flown}


def make_policy(spec: str, **overrides) -> SyncPolicy:
    """Parse ``'name'`` or ``'name:S'`` (e.g. ``'bsp'``, ``'ssp:4'``, ``'rog:20'``)."""
    name, _, s = spec.partition(':')
    name = name.strip().lower()
    if name not in FACTORIES:
        raise ValueError(f'unknown sync system {spec!r}; choose one of {sorted(FACTORIES)} '
                         "(with ':S' for a staleness threshold, e.g. rog:4)")
    kwargs = dict(overrides)
    if s:
        try:
            kwargs['staleness'] = int(s)
        except ValueError:
            raise ValueError(f'bad staleness in {spec!r}: {s!r} is not an integer') from None
    return FACTORIES[name](**kwargs)


__all__ = ['SyncPolicy', 'layout_for', 'make_policy', 'bsp', 'ssp', 'rog', 'flown']
