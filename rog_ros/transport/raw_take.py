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
Take a DDS reader's samples as their serialised bytes, of any sample, view or instance state.

One module below both the bus (:mod:`rog_ros.transport.dds_bus`) and the ROS 2 graph entries'
readers (:mod:`rog_ros.transport.discovery_info`, the doctor's graph check): a raw take lets
one undecodable sample be skipped without taking its batch down with it, and each of those
modules takes this way.
"""

from cyclonedds.core import InstanceState, SampleState, ViewState

from rog_ros.transport import idl

try:  # raw take, so that one undecodable sample does not take its batch down with it
    from cyclonedds._clayer import ddspy_take
except ImportError:  # pragma: no cover - other binding versions
    ddspy_take = None

TAKE_BATCH = 256
"""Samples taken at most by one call."""


def take_serialised(ref):
    """Take up to ``TAKE_BATCH`` serialised samples of the reader ``ref``, of any state."""
    if idl.LEGACY_BINDING:         # binding 0.10 takes every state and has no mask argument
        return ddspy_take(ref, TAKE_BATCH)
    return ddspy_take(ref, SampleState.Any | ViewState.Any | InstanceState.Any, TAKE_BATCH)
