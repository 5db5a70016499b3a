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
ROG_SYSTEMS = ('rog', 'ssp', 'bsp', 'flown')
"""``sync`` values run by Rog's engines (a policy each: ``make_policy``)."""
FLEET_SYSTEMS = ROG_SYSTEMS + PUSH_SYSTEMS
"""``sync`` values a fleet runs: the choices a node, ``rog fleet`` and ``rog robot`` offer."""
SYNC_CHOICES = FLEET_SYSTEMS + tuple(SIM_ONLY)
"""Every ``sync`` name a node knows: the ones it runs, and the ones it refuses with a reason."""


def sim_only_reason(name: str) -> str:
    """
    Return why a fleet refuses simulator-only system ``name`` ('' for any other name).

    A user who read ``rog sim --sync aet`` in the documentation learns why the fleet does not
    run it, rather than only that it is not in the list.
    """
    why = SIM_ONLY.get(str(name).strip().lower())
    return f'runs in the simulator only (rog sim, rog compare): {why}' if why else ''
