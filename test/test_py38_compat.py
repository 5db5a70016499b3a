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
Jetson support (JetPack 5): nothing newer than Python 3.8 and torch 2.0.

* vermin (``setup.cfg`` [vermin]) over rog_ros/, launch/ and scripts/;
* a real Python 3.8 (``$ROG_PYTHON38``, pyenv's 3.8, or ``python3.8`` on the PATH) compiles
  every file and imports every module that does not need torch, in a cached virtual environment
  holding numpy, pyyaml, zstandard and the Cyclone DDS binding that pip picks for 3.8 (0.10,
  the series of ROS 2 Humble's Cyclone DDS and of the robots' images), plus pytest
  (``$ROG_CACHE_DIR/py38-venv``); skipped, saying so, where no Python 3.8 exists (Debian 12
  has none: ``pyenv install 3.8``);
* the embedded transport's tests (messages across a bus, between processes, byte for byte
  against a hand-written client) run on that interpreter and binding, and a process on it
  talks to one on set-up's Python and binding (a Jetson robot and a laptop server);
* no torch API that appeared after 2.0.
"""

from __future__ import annotations

import ast
import glob
import hashlib
import json
import os
from pathlib import Path
import re
import shutil
import subprocess
import sys
import time

import dds_domains
import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECK = ROOT / 'test' / 'py38_check.py'
# Requirements importable on 3.8 without torch (ranges from setup.py).
LIGHT = ('numpy', 'pyyaml', 'zstandard', 'cyclonedds')
# The embedded transport's tests, run by that Python 3.8 (they need neither torch nor rosbags).
TRANSPORT_TESTS = ('test_transport_dds_loopback.py', 'test_wire_independent_client.py',
                   'test_transport_discovery_range.py', 'test_wire_writer_lifecycle.py')
# torch APIs newer than 2.0 (first release that has them) that a contributor might reach for.
NEWER_TORCH = {
    r'torch\.(uint16|uint32|uint64)\b': '2.3',
    r'torch\.float8_': '2.1',
    r'torch\.export\b': '2.1',
    r'torch\.compiler\b': '2.1',
    r'torch\.get_default_device\b': '2.3',
    r'torch\.library\.custom_op\b': '2.4',
    r'torch\.nn\.attention\b': '2.2',
    r'torch\.serialization\.add_safe_globals\b': '2.4',
    r'torch\.utils\.swap_tensors\b': '2.2',
    r'torch\.amp\.GradScaler\b': '2.3',
    r'register_post_accumulate_grad_hook\b': '2.1',
    r'torch\.nn\.utils\.parametrizations\.weight_norm\b': '2.1',
    r'torch\.mtia\b|torch\.xpu\b': '2.3',
}


def _requirements() -> list:
    tree = ast.parse((ROOT / 'setup.py').read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == 'install_requires':
            reqs = [ast.literal_eval(elt) for elt in node.value.elts]
            return [r for r in reqs if re.split(r'[<>=!~]', r)[0].lower() in LIGHT]
    raise AssertionError('setup.py has no install_requires')


def _python38():
    """Return the path of a Python 3.8 interpreter, or None."""
    pyenv = os.environ.get('PYENV_ROOT', os.path.expanduser('~/.pyenv'))
    candidates = [os.environ.get('ROG_PYTHON38', '')]
    candidates += sorted(glob.glob(os.path.join(pyenv, 'versions', '3.8*', 'bin', 'python3.8')))
    candidates += [shutil.which('python3.8') or '']
    for exe in candidates:
        if not exe or not os.access(exe, os.X_OK):
            continue
        probe = subprocess.run([exe, '-c', 'import sys; print(sys.version_info[:2])'],
                               capture_output=True, text=True, timeout=60)
        if probe.returncode == 0 and probe.stdout.strip() == '(3, 8)':
            return exe
    return None


@pytest.fixture(scope='module')
def py38() -> str:
    """Python of a cached Python 3.8 virtual environment with the torch-free requirements."""
    exe = _python38()
    if exe is None:
        pytest.skip('no Python 3.8 on this machine (set ROG_PYTHON38, or `pyenv install 3.8`); '
                    'the Python 3.8 import check did not run')
    reqs = _requirements()
    assert len(reqs) == len(LIGHT), reqs
    cache = Path(os.environ.get('ROG_CACHE_DIR', os.path.expanduser('~/.cache/rog_ros')))
    venv = cache / 'py38-venv'
    stamp = venv / ('ok-' + hashlib.sha256('\n'.join([exe] + reqs).encode()).hexdigest()[:12])
    python = venv / 'bin' / 'python'
    if not stamp.exists():
        subprocess.run([exe, '-m', 'venv', '--clear', str(venv)], check=True, timeout=300)
        pip = subprocess.run([str(python), '-m', 'pip', 'install', '-q', *reqs, 'pytest'],
                             capture_output=True, text=True, timeout=900)
        if pip.returncode != 0:
            pytest.skip(f'could not install {reqs} for Python 3.8: {pip.stderr[-500:]}')
        stamp.write_text('\n'.join(reqs) + '\n')
    return str(python)


def _check(python: str, root: Path) -> tuple:
    env = {k: v for k, v in os.environ.items() if not k.startswith('PYTHON')}
    proc = subprocess.run([python, str(CHECK), str(root)], capture_output=True, text=True,
                          timeout=600, env=env, cwd=str(root))
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def test_python38_compiles_every_file_and_imports_every_torch_free_module(py38):
    # Execute
    rc, report, err = _check(py38, ROOT)
    # Assert
    assert report['python'].startswith('3.8.')
    assert rc == 0 and not report['failed'], json.dumps(report['failed'], indent=1) + err
    assert report['compiled'] >= 100
    assert set(report['needs'].values()) <= {'torch', 'rclpy', 'launch', 'launch_ros',
                                             'ament_index_python', 'matplotlib',
                                             'cryptography'}
    for name in ('rog_ros.protocol.messages', 'rog_ros.net.traces', 'rog_ros.transport.msgdef',
                 'rog_ros.transport.typehash', 'rog_ros.metrics', 'rog_ros.transport.idl',
                 'rog_ros.transport.dds_bus'):
        assert name in report['imported'], (name, report['needs'].get(name))


def test_the_embedded_transport_works_on_python38_and_its_cyclone_binding(py38):
    # JetPack 5 robots run Python 3.8, where pip's newest Cyclone DDS binding is 0.10 (as in
    # the images, built against ROS 2 Humble's Cyclone DDS); until 2026-11-29 the transport
    # used names only later bindings have and every fleet stopped at its first import
    probe = 'from importlib.metadata import version; print(version("cyclonedds"))'
    version = subprocess.run([py38, '-c', probe], capture_output=True, text=True, timeout=60)
    assert version.returncode == 0, version.stderr[-2000:]
    env = {k: v for k, v in os.environ.items() if not k.startswith('PYTHON')}
    env['PYTHONPATH'] = str(ROOT)
    proc = subprocess.run([py38, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', '--noconftest',
                           *[str(ROOT / 'test' / name) for name in TRANSPORT_TESTS]],
                          capture_output=True, text=True, timeout=600, env=env, cwd=str(ROOT))
    assert proc.returncode == 0, version.stdout + proc.stdout[-5000:] + proc.stderr[-2000:]
    assert ' passed' in proc.stdout and 'skipped' not in proc.stdout, proc.stdout[-2000:]


def test_a_python38_robot_talks_to_a_node_on_the_newer_binding(py38):
    # A fleet mixes the two: Jetson robots on Python 3.8 (binding 0.10) and a laptop server on
    # set-up's Python (binding 11). Until 2026-11-29 the 0.10 process crashed at the first
    # contact, on the type objects of the newer one (``invalid type object``, SIGSEGV).
    loopback = pytest.importorskip('test_transport_dds_loopback')
    # Execute: a child on Python 3.8 publishes a burst of chunks to this process, which acks
    got, rc = loopback.burst_from_child(py38)
    # Assert
    assert [c.seq for c in got] == list(range(loopback.BURST))
    assert rc == 0


def test_a_ros2_node_that_starts_later_meets_a_bus_in_the_localhost_range(py38):
    """
    Match a later Cyclone 0.10 participant (rmw's) under ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST.

    A bus on the newer binding never met it (0 in 40 s): Cyclone 11 dropped the discovery
    packets Cyclone 0.10 sends to 127.0.0.1, which arrive on an interface it did not use.
    """
    ranges = pytest.importorskip('test_transport_discovery_range')
    # Prepare: the bus first, as a robot's node that runs before ROS 2 tools are started
    domain = dds_domains.domain(f'{__name__}:late')   # (held: no other process draws it)
    namespace = f'/rog_late_{os.getpid()}'
    child = ranges._start_child(domain, namespace, ranges._child_env(
        ROS_AUTOMATIC_DISCOVERY_RANGE='LOCALHOST'), live_s=20)
    try:
        assert child.stdout.readline().strip() == 'ready'
        time.sleep(2.0)
        # Execute: the ROS 2 side, on rmw's Cyclone 0.10, with the fragment rmw gives it
        matched = ranges.matched_by_ros2_reader(ranges.JAZZY_LOCALHOST, domain, namespace,
                                                python=py38)
    finally:
        out, err = ranges._stop(child)
    # Assert
    assert matched == 1, f'no match; the bus said: {out}{err[-2000:]}'


def test_python38_check_catches_runtime_generics_and_new_stdlib(py38, tmp_path):
    # Prepare: a tiny package with two errors that only a 3.8 interpreter sees
    pkg = tmp_path / 'rog_ros'
    pkg.mkdir()
    (pkg / '__init__.py').write_text('')
    (pkg / 'generic.py').write_text('from __future__ import annotations\nALIAS = list[int]\n')
    (pkg / 'cache.py').write_text('from functools import cache\n')
    (pkg / 'fine.py').write_text('from __future__ import annotations\n'
                                 'def f(x: list[int] | None) -> dict[str, int]:\n'
                                 '    return {}\n')
    # Execute
    rc, report, _ = _check(py38, tmp_path)
    # Assert
    assert rc == 1
    assert set(report['failed']) == {'rog_ros.generic', 'rog_ros.cache'}
    assert 'rog_ros.fine' in report['imported']


def _vermin(*paths: str) -> subprocess.CompletedProcess:
    pytest.importorskip('vermin', reason='vermin is a test extra: pip install -e .[test]')
    run = 'import sys, vermin; sys.argv[0] = "vermin"; sys.exit(vermin.main())'
    return subprocess.run([sys.executable, '-c', run, '--target=3.8-', '--violations', *paths],
                          capture_output=True, text=True, timeout=300, cwd=str(ROOT))


def test_vermin_finds_nothing_newer_than_python38():
    proc = _vermin('rog_ros', 'launch', 'scripts')
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
    assert 'Minimum required versions: 3.8' in proc.stdout


def test_vermin_flags_python39_stdlib(tmp_path):
    bad = tmp_path / 'bad.py'
    bad.write_text('import functools\n\n\n@functools.cache\ndef f():\n'
                   "    return 'ab'.removeprefix('a')\n")
    proc = _vermin(str(bad))
    assert proc.returncode != 0 and 'removeprefix' in proc.stdout


def test_no_torch_api_newer_than_2_0():
    hits = []
    for path in sorted((ROOT / 'rog_ros').rglob('*.py')):
        text = path.read_text()
        for pattern, version in NEWER_TORCH.items():
            for match in re.finditer(pattern, text):
                line = text.count('\n', 0, match.start()) + 1
                hits.append(f'{path.relative_to(ROOT)}:{line}: {match.group(0)} (torch {version})')
    assert not hits, '\n'.join(hits)
