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
The ``sync`` names the fleet nodes accept, without importing the engines (see policy_defaults).

``rog_ros.nodes.push_systems`` runs the push systems and re-exports these.
"""

PUSH_SYSTEMS = ('adacomp', 'asgd', 'comp-asgd', 'gsp')
"""``sync`` values run by the push engines (no staleness argument)."""
SIM_ONLY = {
    'gsp+gds': 'its group densities travel in UploadDensity, a message the wire format '
               '(msg/) does not have',
    'adasgd': "FLEET's server talks in task dataclasses (TaskRequest/TaskAnswer/TaskResult), "
              'not wire messages',
    'aet': 'it has no server (decentralised peers); the fleet runs a server and workers',
}
"""Reference systems refused by ``rog fleet``, with the reason."""
SYNC_CHOICES = ('rog', 'ssp', 'bsp', 'flown') + PUSH_SYSTEMS + tuple(SIM_ONLY)
"""Every ``sync`` value of a node."""
