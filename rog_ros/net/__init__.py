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
Network emulation: bandwidth traces, fluid link models, throughput estimators, shaping.

A leaf package (numpy only): ``traces`` (Trace, files, presets, statistics), ``replay`` and
``replay_log`` (the Rog testbed's replay procedure and its logs), ``mahimahi``
(packet-delivery traces), ``trace_spec`` (a ``--trace`` value: one entry, or one per
robot), ``links``
(FluidLink, DuplexLink, SharedMedium), ``estimator`` (ThroughputEstimator, LaggedRateOracle),
``shaper`` (TokenBucketShaper) and ``cli_trace`` (the ``rog trace`` command).
"""

from __future__ import annotations

from rog_ros.net.estimator import LaggedRateOracle, ThroughputEstimator
from rog_ros.net.links import DuplexLink, FluidLink, SharedMedium
from rog_ros.net.shaper import TokenBucketShaper
from rog_ros.net.traces import (check, generate, load_trace, PRESETS, save_trace, stats,
                                TARGETS, Trace, TraceFormatError)

__all__ = [
    'check', 'DuplexLink', 'FluidLink', 'generate', 'LaggedRateOracle', 'load_trace', 'PRESETS',
    'save_trace', 'SharedMedium', 'stats', 'TARGETS', 'ThroughputEstimator', 'TokenBucketShaper',
    'Trace', 'TraceFormatError',
]
