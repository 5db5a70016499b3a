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
Transport: protocol messages over ROS 2 topics, with or without a ROS 2 install.

Modules (import what you need; this package imports nothing itself, so that the simulator
never loads DDS):

* ``bus``: the :class:`~rog_ros.transport.bus.Bus` interface and its threading contract;
  ``choose``: ``make_bus(kind='auto')``, RclpyBus where ROS 2 is built, else DdsBus;
* ``dds_bus``: ``DdsBus`` on Cyclone DDS (embedded default); ``rclpy_bus``: ``RclpyBus``;
  ``discovery_info``: a DdsBus's node on ``ros_discovery_info`` (``ros2 node list``);
* ``topics``: topic names, message type per topic, QoS profiles;
* ``msgdef`` / ``field_plans`` / ``typehash`` / ``idl`` / ``convert``: ``msg/*.msg`` -> parsed
  definitions and their Python field types (no DDS; the ROS 2 path needs no more) ->
  RIHS01 hashes -> Cyclone IDL types named as ROS 2 names them -> dataclass converters;
* ``cyclone_config``: the ``config/cyclonedds_*.xml`` files and ``CYCLONEDDS_URI``;
  ``cyclone_settings``: the lease and fragment size that value sets, read as Cyclone reads
  them; ``cyclone_log``: what Cyclone logged before a process failed.
"""
