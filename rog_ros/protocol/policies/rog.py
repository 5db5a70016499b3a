# Copyright 2026 rog_ros maintainers. Licensed under the Apache License, Version 2.0.
"""Rog: row-granulated SSP (RSP) with ATP (priority order, MTA prefix, MTA-time deadline)."""

from rog_ros.protocol.policies.base import SyncPolicy


def rog(staleness: int = 4, **overrides) -> SyncPolicy:
    return SyncPolicy(**{'name': f'rog:{staleness}', 'staleness': staleness,
                         'whole_model': False, 'balance': 'deadline', **overrides})
