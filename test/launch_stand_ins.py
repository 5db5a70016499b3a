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
Stand-in ``launch`` and ``launch_ros`` modules: load our launch files without ROS 2.

Each action records what it was built with (``Recorded``), so a test reads the nodes a launch
file starts and their arguments as launch_ros would get them. Shared by the launch-file tests
(``test_launch_robot``) and the ROS 2 name tests (``test_ros_graph_names``).
"""

import types


class Recorded:
    """What a stand-in launch action was built with."""

    def __init__(self, *args, **kwargs):
        """Keep the arguments."""
        self.args, self.kwargs = args, kwargs

    def describe_sub_entities(self):
        """Return the entities this one holds: none, as launch's actions without any."""
        return []

    def describe_conditional_sub_entities(self):
        """Return the ``(why, entities)`` this one may hold: none."""
        return []


class DeclareLaunchArgument(Recorded):
    """Stand-in: a launch argument named by the first argument."""

    @property
    def name(self):
        """Return the argument's name, as launch's ``DeclareLaunchArgument.name``."""
        return self.args[0]


class IncludeLaunchDescription(Recorded):
    """Stand-in: an include of the launch description its source (first argument) gives."""

    @property
    def launch_description_source(self):
        """Return the source, as launch's does."""
        return self.args[0]

    def describe_sub_entities(self):
        """Return the included description where it can be read without a context."""
        included = self.args[0].try_get_launch_description_without_context()
        return [] if included is None else [included]


class LaunchDescriptionSource:
    """Stand-in: a launch file's description, None where it needs a launch context to load."""

    def __init__(self, description):
        """
        Hold the description (None: its path needs a launch configuration).

        A callable is a launch file: launch's file sources load it again at every
        ``try_get_launch_description_without_context``, new objects each time.
        """
        self.description = description

    def try_get_launch_description_without_context(self):
        """Return the description, or None when it cannot be read without a context."""
        if callable(self.description):
            return self.description()
        return self.description


class LaunchDescription(list):
    """Stand-in: a launch description is the list of its entities."""

    def describe_sub_entities(self):
        """Return its entities."""
        return list(self)

    def describe_conditional_sub_entities(self):
        """Return the ``(why, entities)`` it may hold: none."""
        return []


class LaunchConfiguration:
    """Stand-in: the value of a launch argument in a context (a dict here)."""

    def __init__(self, name):
        """Name the argument."""
        self.name = name

    def perform(self, context):
        """Return the argument's value, '' when not given."""
        return getattr(context, 'launch_configurations', context).get(self.name, '')


class LaunchContext(dict):
    """
    Stand-in: a launch context whose launch configurations are the dict itself.

    ``argv`` is what ``ros2 launch`` keeps of its command line: the ``name:=value`` words.
    """

    def __init__(self, configurations=None, argv=()):
        """Hold the launch configurations and the command line's launch arguments."""
        super().__init__(configurations or {})
        self.argv = list(argv)

    @property
    def launch_configurations(self):
        """Return the launch configurations (this dict)."""
        return self


def stand_in_modules() -> dict:
    """Return ``{module name: stand-in module}`` for ``launch`` and ``launch_ros``."""
    launch = types.ModuleType('launch')
    launch.LaunchDescription = LaunchDescription
    actions = types.ModuleType('launch.actions')
    for name in ('OpaqueFunction', 'SetEnvironmentVariable', 'LogInfo', 'RegisterEventHandler',
                 'TimerAction'):
        setattr(actions, name, type(name, (Recorded,), {}))
    actions.DeclareLaunchArgument = DeclareLaunchArgument
    actions.IncludeLaunchDescription = IncludeLaunchDescription
    handlers = types.ModuleType('launch.event_handlers')
    handlers.OnProcessExit = type('OnProcessExit', (Recorded,), {})
    subs = types.ModuleType('launch.substitutions')
    subs.LaunchConfiguration = LaunchConfiguration
    ros_actions = types.ModuleType('launch_ros.actions')
    ros_actions.Node = type('Node', (Recorded,), {})
    return {'launch': launch, 'launch.actions': actions, 'launch.event_handlers': handlers,
            'launch.substitutions': subs, 'launch_ros': types.ModuleType('launch_ros'),
            'launch_ros.actions': ros_actions}
