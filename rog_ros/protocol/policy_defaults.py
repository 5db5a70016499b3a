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
Policy defaults the fleet's settings share with the engines, without importing torch.

``rog_ros.nodes.settings`` builds every node's parameters, CLI options and launch arguments
from these; a launch file (``ros2 launch rog_ros robot.launch.py``) runs in a process of its
own for the whole fleet run, and importing the engines there (torch: 1.9 s and 260 MB of
memory on an x86 laptop, more on a Jetson) only to read four numbers was a cost every robot
paid. ``rog_ros.protocol.policies`` re-exports them; ``test_policy_defaults`` checks that
the settings stay free of torch.
"""

DEFAULT_DEADLINE_FLOOR = 0.0
"""``SyncPolicy.deadline_floor``'s default, the same for the simulator and the fleet nodes."""
DEFAULT_RTT_FLOOR = 2.0
"""``SyncPolicy.rtt_floor``'s default, the same for the simulator and the fleet nodes."""
DEFAULT_OUTAGE_BOUND = 3.0
"""``SyncPolicy.outage_bound``'s default, the same for the simulator and the fleet nodes."""
OUTAGE_BOUND_RANGE = (0.5, 100.0)
"""Values ``SyncPolicy.outage_bound`` accepts (fleet iteration times)."""
ROG_FREE_STRAGGLERS = True
"""``free_stragglers`` of the ``rog`` policy (``rog_ros.protocol.policies.rog``)."""
