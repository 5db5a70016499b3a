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
"""package.xml, CMakeLists.txt and setup.py agree: rosdep keys, linters, installed layout."""

from __future__ import annotations

import ast
import os
from pathlib import Path
import re
import xml.etree.ElementTree as ET

import pytest

ROOT = Path(__file__).resolve().parent.parent

# pip requirement name -> rosdep key (package.xml exec_depend).
PIP_TO_ROSDEP = {
    'torch': 'python3-torch',
    'numpy': 'python3-numpy',
    'pyyaml': 'python3-yaml',
    'zstandard': 'python3-zstandard-pip',
    'matplotlib': 'python3-matplotlib',
    'tqdm': 'python3-tqdm',
    'cyclonedds': 'python3-cyclonedds-pip',
}
# Python keys of package.xml that ros/rosdistro rosdep/python.yaml defines (checked 2026-08).
ROSDISTRO_PYTHON_KEYS = {
    'python3-torch', 'python3-numpy', 'python3-yaml', 'python3-matplotlib', 'python3-tqdm',
    'python3-pytest', 'python3-rosbags-pip', 'python3-cryptography', 'python3-hypothesis',
}
# Packages that the code does not use and package.xml must not declare (std_msgs is used:
# the header of /diagnostics is a std_msgs/Header).
UNUSED = set()
# ROS packages the nodes use without naming them in an import: rclpy.lifecycle serves the
# lifecycle_msgs services of every training node.
USED_THROUGH_RCLPY = {'lifecycle_msgs'}


def _deps(*tags: str) -> list:
    root = ET.parse(ROOT / 'package.xml').getroot()
    return [e.text.strip() for tag in tags for e in root.findall(tag)]


def _install_requires() -> list:
    tree = ast.parse((ROOT / 'setup.py').read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == 'install_requires':
            return [re.split(r'[<>=!~\[ ;]', ast.literal_eval(elt))[0].lower()
                    for elt in node.value.elts]
    raise AssertionError('setup.py has no install_requires')


def _local_rosdep_keys() -> set:
    text = (ROOT / 'rosdep' / 'rog_ros.yaml').read_text()
    return set(re.findall(r'^([a-z0-9][a-z0-9_-]*):', text, flags=re.M))


def test_every_install_requirement_has_its_rosdep_key():
    # Prepare
    run_keys = set(_deps('depend', 'exec_depend'))
    # Execute
    missing = [f'{pip} ({PIP_TO_ROSDEP.get(pip)})' for pip in _install_requires()
               if PIP_TO_ROSDEP.get(pip) not in run_keys]
    # Assert
    assert not missing, f'package.xml lacks the rosdep keys of {missing}'


def test_python_keys_exist_in_rosdistro_or_in_the_shipped_rosdep_file():
    local = _local_rosdep_keys()
    keys = {k for k in _deps('depend', 'exec_depend', 'test_depend') if k.startswith('python3-')}
    unknown = keys - ROSDISTRO_PYTHON_KEYS - local
    assert not unknown, f'no rosdep rule for {sorted(unknown)}'
    assert local == {'python3-zstandard-pip', 'python3-cyclonedds-pip'}
    assert not local & ROSDISTRO_PYTHON_KEYS


def test_no_unused_dependencies():
    declared = set(_deps('depend', 'build_depend', 'exec_depend', 'test_depend'))
    assert not declared & UNUSED


def _ros_packages_used() -> set:
    """Return the ROS packages rog_ros/ imports (``pkg.msg``, rclpy) or publishes types of."""
    from rog_ros.transport.standard_msgs import CLASSES
    used = set(USED_THROUGH_RCLPY) | {name.split('/')[0] for name in CLASSES}
    for path in (ROOT / 'rog_ros').rglob('*.py'):
        text = path.read_text(encoding='utf-8')
        used |= set(re.findall(r'^\s*(?:from|import) (\w+)\.(?:msg|srv|action)\b', text,
                               flags=re.M))
        used |= set(re.findall(r'^\s*(?:from|import) (rclpy)\b', text, flags=re.M))
    return used - {'rog_ros'}


def test_every_ros_package_the_nodes_use_is_declared():
    # Prepare
    declared = set(_deps('depend', 'exec_depend'))
    # Execute
    used = _ros_packages_used()
    # Assert: declared, not left to arrive through another package's dependencies
    assert {'rclpy', 'rcl_interfaces', 'std_msgs', 'diagnostic_msgs'} <= used
    assert not used - declared, f'package.xml lacks exec_depend {sorted(used - declared)}'


def test_cmake_calls_the_linters_that_package_xml_declares():
    # Prepare
    cmake = (ROOT / 'CMakeLists.txt').read_text()
    declared = {k[len('ament_cmake_'):] for k in _deps('test_depend')
                if k.startswith('ament_cmake_') and k != 'ament_cmake_pytest'}
    # Execute
    called = set(re.findall(r'^\s*ament_(copyright|flake8|lint_cmake|pep257|xmllint|cpplint)\(',
                            cmake, flags=re.M))
    # Assert
    assert declared and called == declared
    assert 'ament_lint_auto_find_test_dependencies()' in cmake


def test_cmake_pytest_tests_exist():
    cmake = (ROOT / 'CMakeLists.txt').read_text()
    start = cmake.index('foreach(_test')
    block = cmake[start:cmake.index('ament_add_pytest_test', start)]
    names = re.findall(r'\b(test_\w+)', block)
    assert len(names) >= 5
    for name in names:
        assert (ROOT / 'test' / f'{name}.py').is_file(), name


@pytest.mark.skipif(not os.environ.get('ROG_ROS_EXPECT_PREFIX'),
                    reason='only under colcon test (CMakeLists.txt sets ROG_ROS_EXPECT_PREFIX)')
def test_colcon_install_is_complete():
    # Prepare
    import rog_ros
    from rog_ros.transport import msgdef
    prefix = Path(os.environ['ROG_ROS_EXPECT_PREFIX']).resolve()
    share = prefix / 'share' / 'rog_ros'
    # Assert: the tests import the installed package, which finds its installed msg/
    assert prefix in Path(rog_ros.__file__).resolve().parents
    assert msgdef.msg_dir().resolve() == share / 'msg'
    for rel in ('launch/fleet.launch.py', 'config/fleet.yaml', 'config/cyclonedds_wifi.xml',
                'package.xml'):
        assert (share / rel).is_file(), rel
    for exe in ('rog_server', 'rog_worker', 'netmon'):
        assert os.access(prefix / 'lib' / 'rog_ros' / exe, os.X_OK), exe
