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
The launch description shared by launch/*.launch.py: the fleet plan as launch_ros Nodes.

Import-guarded: without ROS 2 this module imports fine and ``generate`` raises a clear error,
so the launch files can be parsed and tested anywhere. Nodes receive their parameters as
command-line ``arguments`` (the plan's options); launch_ros appends ``--ros-args`` with the
node name, which the nodes strip.
"""

from __future__ import annotations

import os
import time

from rog_ros.experiments.fleet import LAUNCH_ARGUMENTS, launch_overrides, \
    load_parameter_file, plan

try:
    from launch import LaunchDescription
    from launch.actions import DeclareLaunchArgument, OpaqueFunction
    from launch.substitutions import LaunchConfiguration
    from launch_ros.actions import Node
except ImportError:  # no ROS 2 here: generate() explains
    LaunchDescription = None


def config_file(name: str) -> str:
    """``config/<name>``: installed share directory of rog_ros, else the source tree."""
    try:
        from ament_index_python.packages import get_package_share_directory
        path = os.path.join(get_package_share_directory('rog_ros'), 'config', name)
        if os.path.isfile(path):
            return path
    except (ImportError, LookupError):
        pass
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.path.join(root, 'config', name)


def node_specs(values: dict, default_config: str) -> list:
    """Return the plan for launch-argument strings ``values`` (pure; what ``_nodes`` launches)."""
    config = values.get('config') or default_config
    overrides = launch_overrides(values)
    overrides['epoch'] = time.time()      # one trace clock for every node of this launch
    return plan(load_parameter_file(config) if config else {}, overrides)


def generate(default_config: str):
    """Return a LaunchDescription: the launch arguments, then every node of the fleet plan."""
    if LaunchDescription is None:
        raise RuntimeError('launch files need ROS 2 (launch, launch_ros); without ROS 2 run '
                           '`rog fleet`, which starts the same nodes')

    def _nodes(context):
        values = {k: LaunchConfiguration(k).perform(context) for k in LAUNCH_ARGUMENTS}
        return [Node(package='rog_ros', executable=spec.executable, name=spec.name,
                     arguments=spec.argv(), output='screen')
                for spec in node_specs(values, default_config)]

    args = [DeclareLaunchArgument(k, default_value='', description=d)
            for k, d in LAUNCH_ARGUMENTS.items()]
    return LaunchDescription(args + [OpaqueFunction(function=_nodes)])
