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
Launch a Rog fleet (workload and system from the launch arguments / config/fleet.yaml).

    ros2 launch rog_ros fleet.launch.py sync:=rog staleness:=4 workers:=3 trace:=indoors

Every setting (docs/configuration.md) is a launch argument; empty ones come from config:= (the
parameter file). Emulated link shaping only when trace:= is given. Starts rog_server,
rog_worker_0..N-1 and netmon from the fleet plan (rog_ros.nodes.plan), exactly the
processes `rog fleet` starts without ROS 2.
"""

from __future__ import annotations

from rog_ros.nodes.launching import config_file, generate

DEFAULT_CONFIG = config_file('fleet.yaml')


def generate_launch_description():
    return generate(DEFAULT_CONFIG, __file__)
