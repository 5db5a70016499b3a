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
# Test double of rosidl_default_generators for .ci/colcon.sh: does to the
# package's Python install what rosidl_generator_py does on Humble and Jazzy
# (ament_python_install_package of a generated rog_ros/ holding msg/ and an
# empty __init__.py), so CI catches a CMakeLists that breaks on ROS machines.

macro(rosidl_generate_interfaces target)
  set(_rosidl_double_out
    "${CMAKE_CURRENT_BINARY_DIR}/rosidl_generator_py/${PROJECT_NAME}")
  file(MAKE_DIRECTORY "${_rosidl_double_out}/msg")
  file(WRITE "${_rosidl_double_out}/__init__.py" "")
  file(WRITE "${_rosidl_double_out}/msg/__init__.py" "GENERATED = True\n")
  ament_python_install_package(${PROJECT_NAME}
    PACKAGE_DIR "${_rosidl_double_out}")
  install(DIRECTORY msg DESTINATION share/${PROJECT_NAME})
endmacro()
