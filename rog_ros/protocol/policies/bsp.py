# Copyright 2026 rog_ros maintainers. Licensed under the Apache License, Version 2.0.
"""BSP: bulk-synchronous parallel = SSP with threshold 0 (a barrier every iteration)."""

from rog_ros.protocol.policies.base import SyncPolicy


def bsp(staleness: int = 0, **overrides) -> SyncPolicy:
    if staleness != 0:
        raise ValueError('bsp has no staleness threshold (it is ssp:0); use ssp:S instead')
    return SyncPolicy(**{'name': 'bsp', 'staleness': 0, 'whole_model': True,
                         'mta_override': 1.0, 'balance': 'none', **overrides})
