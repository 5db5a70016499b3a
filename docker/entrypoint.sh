#!/usr/bin/env bash
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
#
# Entry point of the rog_ros images: sources ROS 2 and the rog_ros workspace, selects Cyclone
# DDS with the shipped Wi-Fi configuration unless RMW_IMPLEMENTATION / CYCLONEDDS_URI are set,
# then starts this robot's part of the fleet:
#
#   ROLE=server              ros2 launch rog_ros robot.launch.py role:=server ARGS
#   ROLE=worker RANK=K       ros2 launch rog_ros robot.launch.py role:=worker rank:=K ARGS
#   ROLE=netmon              ros2 run rog_ros netmon ARGS
#
# ARGS come from ROG_ARGS (e.g. "workload:=mpcol sync:=rog staleness:=4 workers:=3"; for
# ROLE=netmon netmon's own flags, e.g. "--interface wlan0 --nodes 1"); a worker
# writes its trained model to ROG_MODEL_OUT (default /runs/rog_robot_K_model.pt) unless
# ROG_ARGS sets model_out. server_host:= and peers:= in ROG_ARGS reach the launch, which adds
# them as unicast peers to the CYCLONEDDS_URI set here (or given to the container).
# Given a command (`docker run IMAGE bash`), runs that command in the same environment instead.
set -eo pipefail   # no -u: ROS 2 setup files read unset variables

ROS_DISTRO=${ROS_DISTRO:-humble}
ROG_WS=${ROG_WS:-/opt/rog_ws}
# ROS 2 from Debian packages (/opt/ros/D/setup.bash) or built from source (L4T images).
for setup in "/opt/ros/${ROS_DISTRO}/install/setup.bash" "/opt/ros/${ROS_DISTRO}/setup.bash"; do
  if [ -f "$setup" ]; then
    # shellcheck disable=SC1090
    . "$setup"
    break
  fi
done
# Packages the L4T image had to build itself (rmw_cyclonedds_cpp), if any.
if [ -f /opt/rog_deps/install/setup.bash ]; then
  # shellcheck disable=SC1091
  . /opt/rog_deps/install/setup.bash
fi
if [ ! -f "${ROG_WS}/install/setup.bash" ]; then
  echo "rog-entrypoint: no colcon workspace at ${ROG_WS} (set ROG_WS)" >&2
  exit 2
fi
# shellcheck disable=SC1091
. "${ROG_WS}/install/setup.bash"

export RMW_IMPLEMENTATION=${RMW_IMPLEMENTATION:-rmw_cyclonedds_cpp}
export CYCLONEDDS_URI=${CYCLONEDDS_URI:-file://${ROG_WS}/install/rog_ros/share/rog_ros/config/cyclonedds_wifi.xml}

if [ "$#" -gt 0 ]; then
  exec "$@"
fi

read -r -a args <<< "${ROG_ARGS:-}"
case "${ROLE:-}" in
  server)
    exec ros2 launch rog_ros robot.launch.py role:=server "${args[@]}"
    ;;
  worker)
    if ! [[ "${RANK:-}" =~ ^[0-9]+$ ]]; then
      echo "rog-entrypoint: RANK must be the worker index (0, 1, ...), got '${RANK:-}'" >&2
      exit 2
    fi
    # the robot's trained model (the fleet's final one) outlives the container in /runs
    if [[ " ${ROG_ARGS:-} " != *" model_out:="* ]]; then
      args+=("model_out:=${ROG_MODEL_OUT:-/runs/rog_robot_${RANK}_model.pt}")
    fi
    exec ros2 launch rog_ros robot.launch.py role:=worker "rank:=${RANK}" "${args[@]}"
    ;;
  netmon)
    # ros2 run takes netmon's own flags; launch arguments (workers:=3) would stop it
    for a in "${args[@]}"; do
      [ "$a" = --ros-args ] && break
      if [[ "$a" == *:=* ]]; then
        echo "rog-entrypoint: ROLE=netmon runs netmon alone (ros2 run), so ROG_ARGS holds its flags (e.g. --interface wlan0 --nodes 1), not launch arguments such as '$a'" >&2
        exit 2
      fi
    done
    exec ros2 run rog_ros netmon "${args[@]}"
    ;;
  *)
    echo "rog-entrypoint: ROLE must be server, worker or netmon, got '${ROLE:-}'" >&2
    exit 2
    ;;
esac
