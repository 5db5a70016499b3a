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
"""
Constants the sync policies are checked against, in a module without torch.

``SyncPolicy`` validates its fields against them when a policy is made, and fleets make one
to check their settings before any node starts: in ``rog robot``'s supervisor and in a launch
file's process, which live for the whole run on a robot and need no tensors. Defined here,
they keep those processes free of torch (seconds to import and a few hundred MB on a
Jetson); ``core.atp`` and ``core.slack`` use them from here.
"""

CONVENTIONS = ('gt', 'ge')
"""Staleness conventions: a row triggers at ``u > S`` ('gt', the spec's) or ``u >= S``."""

DEFAULT_MAX_SLACK = 12
"""Largest straggler slack (S = 4 becomes 16, MTA 0.28 -> 0.12 of the rows)."""
