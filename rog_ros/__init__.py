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
rog_ros: a team of robots fine-tunes one shared PyTorch model over unstable Wi-Fi.

Layers (dependencies point downward only): ``core`` (pure tensor algorithms) <- ``protocol``
(sans-I/O engines) <- ``sim`` | ``nodes``; ``net``, ``transport`` and ``workloads`` are leaves.
"""

from __future__ import annotations

__version__ = '0.1.0'
