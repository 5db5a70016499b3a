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
Routing: which topic carries an engine's ``Send(dest, msg)``, and what each node subscribes.

One topic per direction and per worker, so a robot never receives (and its Wi-Fi never
carries) the downlink traffic of another robot:

* uplink, every worker -> server: ``<ns>/up/chunks`` (gradients), ``<ns>/up/acks`` (acks of
  the downlink);
* downlink, server -> worker r: ``<ns>/w<r>/chunks``, ``/acks``, ``/schedule``, ``/versions``;
* status, one topic per node so plots can follow one robot: ``<ns>/status/<node>/train_status``
  (``rog_server``, ``rog_worker_2``), ``<ns>/status/<netmon node>/link_stats``.

The last segment selects the ROS 2 message type (:mod:`rog_ros.transport.topics`). Receivers
still check addressing fields (``receiver``, ``worker``): the engines validate them.
"""

from __future__ import annotations

from rog_ros.protocol.messages import SERVER
from rog_ros.transport.topics import DEFAULT_TOPIC

UPLINK_TYPES = ('RowChunk', 'TransferAck')
DOWNLINK_TYPES = ('RowChunk', 'TransferAck', 'Schedule', 'RowVersions')


def train_status(node: str) -> str:
    """Relative TrainStatus topic of node ``node``: ``'status/rog_worker_2/train_status'``."""
    return f'status/{node}/train_status'


def link_stats(node: str) -> str:
    """Relative LinkStats topic of netmon node ``node``: ``'status/netmon_0/link_stats'``."""
    return f'status/{node}/link_stats'


def netmon_name(rank=None) -> str:
    """Node name of a netmon: the fleet's or the server robot's (None), or robot ``rank``'s."""
    return 'netmon' if rank is None else f'netmon_{int(rank)}'


def netmon_names(n_workers: int) -> list:
    """Every netmon node name a fleet of ``n_workers`` can have (one per machine, or one)."""
    return [netmon_name()] + [netmon_name(r) for r in range(int(n_workers))]


def worker_name(rank: int) -> str:
    """Node name of worker ``rank``."""
    return f'rog_worker_{int(rank)}'


def prefix(dest: int) -> str:
    """Relative topic prefix of the traffic addressed to ``dest`` (a rank or SERVER)."""
    if dest == SERVER:
        return 'up'
    if dest < 0:
        raise ValueError(f'bad destination {dest}')
    return f'w{int(dest)}'


def topic_for(dest: int, msg) -> str:
    """Relative topic of ``msg`` sent to ``dest``: ``'up/chunks'``, ``'w2/schedule'``, ..."""
    return f'{prefix(dest)}/{DEFAULT_TOPIC[msg.TYPE]}'


def server_inbox() -> list:
    """Topics the server subscribes to."""
    return [f'up/{DEFAULT_TOPIC[t]}' for t in UPLINK_TYPES]


def server_outbox(n_workers: int) -> list:
    """Topics the server publishes on (advertised up front so workers can match them)."""
    return [f'w{r}/{DEFAULT_TOPIC[t]}' for r in range(n_workers) for t in DOWNLINK_TYPES]


def worker_inbox(rank: int) -> list:
    """Topics worker ``rank`` subscribes to."""
    return [f'w{rank}/{DEFAULT_TOPIC[t]}' for t in DOWNLINK_TYPES]


def worker_outbox() -> list:
    """Topics every worker publishes on."""
    return server_inbox()
