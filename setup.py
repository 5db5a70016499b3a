# Copyright 2026 rog_ros maintainers. Licensed under the Apache License, Version 2.0.
"""pip installation of rog_ros (the ROS 2 build uses CMakeLists.txt + package.xml instead)."""
from setuptools import find_packages, setup

setup(
    name='rog_ros',
    version='0.1.0',
    description='Row-granulated stale-synchronous fleet training (Rog) for ROS 2 and PyTorch',
    license='Apache-2.0',
    python_requires='>=3.10',
    packages=find_packages(include=['rog_ros', 'rog_ros.*']),
    package_data={'rog_ros': ['msg/*.msg', 'config/*.yaml', 'config/traces/*']},
    include_package_data=True,
    install_requires=[
        # Robots bring NVIDIA's own wheel; set-up and CI pin the CPU wheel before this.
        'torch>=2.0',
        'numpy>=1.23',
        'pyyaml>=6',
        'zstandard>=0.21',
        'matplotlib>=3.6',
        'tqdm>=4.60',
        'cyclonedds>=0.10.5',
    ],
    extras_require={'test': ['pytest>=7', 'rosbags>=0.9.20', 'h5py>=3']},
    entry_points={
        'console_scripts': [
            'rog = rog_ros.cli:main',
            'rog_server = rog_ros.nodes.rog_server:main',
            'rog_worker = rog_ros.nodes.rog_worker:main',
            'netmon = rog_ros.nodes.netmon:main',
        ],
    },
)
