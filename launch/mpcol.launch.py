# Copyright 2026 rog_ros maintainers. Licensed under the Apache License, Version 2.0.
"""
Launch MPCOL (route-planning policy adaptation) under Rog, config/mpcol.yaml.

    ros2 launch rog_ros mpcol.launch.py sync:=rog staleness:=4 workers:=3 trace:=indoors

Arguments: workload, sync, staleness, workers, trace, namespace, config (empty = from the
parameter file). Starts rog_server, rog_worker_0..N-1 and netmon from the fleet plan
(rog_ros.experiments.fleet), exactly the processes `rog fleet` starts without ROS 2.
"""

from rog_ros.nodes.launching import config_file, generate

DEFAULT_CONFIG = config_file('mpcol.yaml')


def generate_launch_description():
    return generate(DEFAULT_CONFIG)
