# Copyright 2026 rog_ros maintainers
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""BSP: bulk-synchronous parallel = SSP with threshold 0 (a barrier every iteration)."""

from __future__ import annotations

from rog_ros.protocol.policies.base import SyncPolicy


def bsp(staleness: int = 0, **overrides) -> SyncPolicy:
    if staleness != 0:
        raise ValueError('bsp has no staleness threshold (it is ssp:0); use ssp:S instead')
    return SyncPolicy(**{'name': 'bsp', 'staleness': 0, 'whole_model': True,
                         'mta_override': 1.0, 'balance': 'none', **overrides})
