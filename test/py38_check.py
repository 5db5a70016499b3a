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
Python 3.8 check of the repository, run BY a Python 3.8 interpreter (test_py38_compat.py).

    python3.8 test/py38_check.py REPO_ROOT

Compiles every Python file of rog_ros/, launch/, scripts/ and test/ with this interpreter's
parser, then imports every module of rog_ros; a module whose import stops at a missing optional
dependency (torch, cyclonedds, ROS 2, ...) counts as "needs <dependency>", any other error
(syntax, ``list[int]`` or ``X | Y`` evaluated at run time, a standard-library name newer than
3.8) as a failure. Prints one JSON object: compiled, imported, needs, failed.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
import sys

# Dependencies a module may need that the check's Python 3.8 environment lacks on purpose.
OPTIONAL = {
    'torch', 'cyclonedds', 'rclpy', 'launch', 'launch_ros', 'ament_index_python',
    'builtin_interfaces', 'diagnostic_msgs', 'lifecycle_msgs', 'rcl_interfaces', 'std_msgs',
    'matplotlib', 'tqdm', 'h5py', 'rosbags', 'mcap', 'mcap_ros2', 'pytest', 'hypothesis',
    'cryptography',
}
SOURCE_DIRS = ('rog_ros', 'launch', 'scripts', 'test')


def _is_python_script(path: Path) -> bool:
    with open(path, errors='replace') as f:
        first = f.readline()
    return first.startswith('#!') and 'python' in first


def python_files(root: Path) -> list:
    """Return every Python source under SOURCE_DIRS (scripts/ holds extension-less ones)."""
    files = []
    for name in SOURCE_DIRS:
        for path in sorted((root / name).rglob('*')):
            if not path.is_file() or '__pycache__' in path.parts:
                continue
            if path.suffix == '.py' or (path.suffix == '' and _is_python_script(path)):
                files.append(path)
    return files


def module_names(root: Path) -> list:
    """Return the dotted names of every module of the rog_ros package."""
    names = []
    for path in sorted((root / 'rog_ros').rglob('*.py')):
        parts = list(path.relative_to(root).with_suffix('').parts)
        if parts[-1] == '__init__':
            parts.pop()
        names.append('.'.join(parts))
    return names


def main(argv: list) -> int:
    root = Path(argv[1]).resolve()
    sys.path.insert(0, str(root))
    report = {'python': '.'.join(map(str, sys.version_info[:3])), 'compiled': 0,
              'imported': [], 'needs': {}, 'failed': {}}
    for path in python_files(root):
        try:
            compile(path.read_text(), str(path), 'exec', dont_inherit=True)
            report['compiled'] += 1
        except SyntaxError as exc:
            report['failed'][str(path.relative_to(root))] = f'SyntaxError: {exc}'
    for name in module_names(root):
        try:
            importlib.import_module(name)
            report['imported'].append(name)
        except ModuleNotFoundError as exc:
            top = (exc.name or '').split('.')[0]
            if top in OPTIONAL or (exc.name or '').startswith('rog_ros.msg'):
                report['needs'][name] = exc.name
            else:
                report['failed'][name] = f'{type(exc).__name__}: {exc}'
        except Exception as exc:  # noqa: B902 - every other error is a 3.8 incompatibility
            report['failed'][name] = f'{type(exc).__name__}: {exc}'
    print(json.dumps(report, indent=1, sort_keys=True))
    return 1 if report['failed'] else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
