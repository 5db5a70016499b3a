# Copyright 2026 rog_ros maintainers. Licensed under the Apache License, Version 2.0.
"""SSP: stale-synchronous parallel; whole-model transfers, stall iff c - min_s c_s > S."""

from rog_ros.protocol.policies.base import SyncPolicy


def ssp(staleness: int = 4, **overrides) -> SyncPolicy:
    return SyncPolicy(**{'name': f'ssp:{staleness}', 'staleness': staleness,
                         'whole_model': True, 'mta_override': 1.0, 'balance': 'none',
                         **overrides})
