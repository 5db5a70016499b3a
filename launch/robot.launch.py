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
Launch one robot of a real fleet: the server robot or worker robot K.

    ros2 launch rog_ros robot.launch.py role:=server workers:=3 workload:=mpcol
    ros2 launch rog_ros robot.launch.py role:=worker rank:=1 workers:=3 server_host:=10.0.0.10

Every setting (docs/configuration.md) is a launch argument; empty ones come from config:=
(default config/fleet.yaml). Real links: nothing is shaped unless trace:= is given. Sets
RMW_IMPLEMENTATION=rmw_cyclonedds_cpp and CYCLONEDDS_URI (shipped Wi-Fi configuration, plus
server_host/peers as unicast peers) unless already set. Without ROS 2: `rog robot --role ...`.
"""

from __future__ import annotations

from rog_ros.nodes.launching import config_file, generate_robot

DEFAULT_CONFIG = config_file('fleet.yaml')


def generate_launch_description():
    return generate_robot(DEFAULT_CONFIG, __file__)
