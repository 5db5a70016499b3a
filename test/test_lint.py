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
ROS 2 lint tests (ament_flake8, ament_pep257, ament_copyright) over rog_ros/ and test/.

On a ROS 2 machine ``colcon test`` runs them with the ament linters of the distribution; on
Debian/Ubuntu without ROS they come from ``apt-get install python3-ament-flake8
python3-ament-pep257 python3-ament-copyright`` (plus the flake8 plugins that ROS installs with
ament_flake8, see ``_INSTALL``). A linter that is missing skips its test, saying so.
"""

import importlib
from pathlib import Path
import shutil
import subprocess

import pytest

ROOT = Path(__file__).resolve().parent.parent
PATHS = [str(ROOT / 'rog_ros'), str(ROOT / 'test')]
_INSTALL = ('apt-get install -y python3-ament-flake8 python3-ament-pep257 '
            'python3-ament-copyright python3-flake8-blind-except python3-flake8-builtins '
            'python3-flake8-class-newline python3-flake8-comprehensions '
            'python3-flake8-deprecated python3-flake8-docstrings python3-flake8-import-order '
            'python3-flake8-quotes')


def _run_linter(tool: str, entry: str) -> tuple:
    """Run ``tool`` on PATHS in-process if importable, else its executable; return (rc, log)."""
    try:
        module = importlib.import_module(f'{tool}.main')
    except ImportError:
        module = None
    if module is not None:
        rc = getattr(module, entry)(argv=PATHS)
        return (rc[0] if isinstance(rc, tuple) else rc), ''
    exe = shutil.which(tool)
    if exe is None:
        pytest.skip(f'{tool} is not installed (Debian/Ubuntu: {_INSTALL})')
    proc = subprocess.run([exe, *PATHS], capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout[-20000:] + proc.stderr[-5000:]


def test_flake8():
    rc, log = _run_linter('ament_flake8', 'main_with_errors')
    assert rc == 0, f'ament_flake8 found code style errors\n{log}'


def test_pep257():
    rc, log = _run_linter('ament_pep257', 'main')
    assert rc == 0, f'ament_pep257 found docstring style errors\n{log}'


def test_copyright():
    rc, log = _run_linter('ament_copyright', 'main')
    assert rc == 0, f'ament_copyright found files without a recognised copyright/license\n{log}'
