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
``rog doctor``: is this machine ready to train with a fleet, and if not, what to change.

A new robot, a fresh container or a colleague's laptop fails in a handful of known ways:
the wrong torch (or none), no Cyclone DDS binding, DDS that cannot reach itself (multicast
off, a ``CYCLONEDDS_URI`` pointing at a missing file, a peer that does not resolve), a kernel
receive buffer below what the Wi-Fi configuration asks, clocks not synchronised between
robots, a busy machine. Each shows up deep in a run as a stall or a traceback; here each is
one line with its fix (the knobs of docs/troubleshooting.md), before anything starts.

Every check returns ``Finding`` rows and never raises (a check that breaks reports itself as
failed). DDS round trips run in a child process with a timeout: Cyclone aborts the process on
a configuration it cannot use, and discovery can hang. Exit status 1 when a check failed.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

LEVELS = ('ok', 'info', 'warn', 'fail')
RMEM_PATH = '/proc/sys/net/core/rmem_max'
RMEM_WANTED = 8 * 1024 * 1024
"""Receive buffer the shipped Cyclone configurations ask for (config/cyclonedds_*.xml)."""
ROUND_TRIP_TIMEOUT_S = 30.0
MEMORY_WANTED_GB = 2.0
"""A local fleet (server, three robots, netmon, each with torch) needs about this much."""


@dataclass
class Finding:
    """One line of the report: what was checked, how it stands, and what to do about it."""

    check: str
    level: str
    detail: str
    fix: str = ''


def _python():
    version = '.'.join(map(str, sys.version_info[:3]))
    if sys.version_info < (3, 8):
        return [Finding('python', 'fail', f'Python {version}', 'rog_ros needs Python 3.8 or '
                        'newer (JetPack 5 ships 3.8; setup.sh makes a 3.11 .venv)')]
    return [Finding('python', 'ok', f'Python {version} ({sys.executable})')]


def _version_tuple(text: str) -> tuple:
    return tuple(int(p) for p in re.findall(r'\d+', text.split('+')[0])[:2])


def _torch():
    try:
        torch = importlib.import_module('torch')
    except ImportError as exc:
        return [Finding('torch', 'fail', f'cannot import torch ({exc})',
                        'bash setup.sh, or pip install torch==2.13.0 (CPU); on a Jetson, '
                        "NVIDIA's wheel for your JetPack")]
    version = torch.__version__
    if _version_tuple(version) < (2, 0):
        return [Finding('torch', 'fail', f'torch {version}', 'rog_ros needs torch 2.0 or newer')]
    if torch.cuda.is_available():
        device = f'CUDA: {torch.cuda.get_device_name(0)}'
    else:
        device = 'CPU only'
    return [Finding('torch', 'ok', f'torch {version} ({device}; {torch.get_num_threads()} '
                    'threads)')]


def _rclpy_available() -> bool:
    try:
        importlib.import_module('rclpy')
    except ImportError:
        return False
    return True


def _cyclonedds():
    try:
        module = importlib.import_module('cyclonedds')
        importlib.import_module('cyclonedds.domain')
    except ImportError as exc:
        level = 'warn' if _rclpy_available() else 'fail'
        return [Finding('cyclonedds', level, f'cannot import the Cyclone DDS binding ({exc})',
                        'pip install cyclonedds (setup.sh does); without it only ROS 2 '
                        '(rclpy) nodes can run, and rog fleet cannot')]
    version = getattr(module, '__version__', None) or _distribution_version('cyclonedds')
    return [Finding('cyclonedds', 'ok', f'cyclonedds {version} (the embedded transport)')]


def _distribution_version(name: str) -> str:
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:  # noqa: B902 - PackageNotFoundError, or no metadata in a source tree
        return '(version unknown)'


def _package():
    import rog_ros
    where = os.path.dirname(os.path.dirname(os.path.abspath(rog_ros.__file__)))
    return [Finding('rog_ros', 'ok', f'rog_ros {rog_ros.__version__} from {where}')]


def round_trip(config: str, domain: int, timeout_s: float = 10.0) -> dict:
    """
    Publish one message between two participants of this process; return what happened.

    ``config``: a configuration for ``DdsBus`` (a path or XML), or '' for the environment's
    (``$CYCLONEDDS_URI`` or Cyclone's defaults). Run in a child (``--round-trip``).
    """
    from rog_ros.protocol import messages as m
    from rog_ros.transport.dds_bus import DdsBus
    namespace = f'/rog_doctor_{os.getpid()}'
    start = time.monotonic()
    a = DdsBus(namespace=namespace, domain_id=domain, config=config or None)
    b = DdsBus(namespace=namespace, domain_id=domain, config=config or None)
    try:
        b.subscribe('doctor/train_status')
        a.advertise('doctor/train_status')
        deadline = start + timeout_s
        while a.matched('doctor/train_status') < 1:
            if time.monotonic() > deadline:
                return {'ok': False, 'why': f'the two participants did not discover each '
                        f'other within {timeout_s:g} s'}
            time.sleep(0.02)
        discovered = time.monotonic() - start
        sent = time.monotonic()
        a.publish('doctor/train_status', m.TrainStatus(node=7, stamp=1.0))
        while time.monotonic() < deadline:
            for _, msg in b.poll(0.05):
                if getattr(msg, 'node', None) == 7:
                    return {'ok': True, 'discovery_s': discovered,
                            'latency_ms': 1e3 * (time.monotonic() - sent)}
        return {'ok': False, 'why': f'discovered, but the message did not arrive within '
                f'{timeout_s:g} s'}
    finally:
        a.close()
        b.close()


def _round_trip_child(config: str, label: str, fix: str):
    """Run ``round_trip`` in a child process; a crash, abort or hang is a finding too."""
    domain = 150 + os.getpid() % 80        # away from 0 and from rog fleet's domains
    cmd = [sys.executable, '-m', 'rog_ros.nodes.doctor', '--round-trip', config,
           '--domain', str(domain)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=ROUND_TRIP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return Finding(label, 'fail', f'DDS round trip hung for {ROUND_TRIP_TIMEOUT_S:g} s', fix)
    lines = done.stdout.strip().splitlines()
    try:
        result = json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = ' '.join((done.stderr or done.stdout).strip().splitlines()[-2:])[:300]
        how = (f'was killed by signal {-done.returncode} (Cyclone aborts on a configuration '
               'it cannot use)' if done.returncode < 0 else f'ended with status {done.returncode}')
        return Finding(label, 'fail', f'DDS round trip {how}: {tail or "no output"}', fix)
    if not result.get('ok'):
        return Finding(label, 'fail', f'DDS round trip failed: {result.get("why")}', fix)
    return Finding(label, 'ok', f'DDS round trip: discovery {result["discovery_s"]:.2f} s, '
                   f'one message {result["latency_ms"]:.1f} ms')


def _dds():
    try:
        importlib.import_module('cyclonedds.domain')
    except ImportError:
        return []                           # said by the cyclonedds check
    from rog_ros.transport.cyclone_config import config_path
    out = [_round_trip_child(str(config_path('loopback')), 'dds (rog fleet)',
                             'see docs/troubleshooting.md, "Robots do not see each other"; '
                             'in a container: a loopback interface with multicast')]
    uri = os.environ.get('CYCLONEDDS_URI', '')
    if not uri:                             # what rog robot sets when the user has not
        out.append(_round_trip_child(str(config_path('wifi')), 'dds (rog robot)',
                                     'rog robot uses config/cyclonedds_wifi.xml when '
                                     'CYCLONEDDS_URI is unset; see docs/troubleshooting.md'))
    else:
        missing = [p for p in re.findall(r'file://([^,<\s]+)', uri) if not os.path.exists(p)]
        if missing:
            out.append(Finding('dds (CYCLONEDDS_URI)', 'fail', f'CYCLONEDDS_URI names '
                               f'{", ".join(missing)}, which does not exist',
                               'point it at an existing file (config/cyclonedds_wifi.xml), '
                               'or unset it'))
        else:
            out.append(_round_trip_child('', 'dds (CYCLONEDDS_URI)',
                                         'check the configuration CYCLONEDDS_URI gives: '
                                         'its <Interfaces>, and every <Peer> must resolve'))
    return out


def _environment():
    out = []
    value = os.environ.get('ROS_DOMAIN_ID', '').strip()
    if value and not (value.isdigit() and 0 <= int(value) <= 232):
        out.append(Finding('ROS_DOMAIN_ID', 'fail', f'ROS_DOMAIN_ID={value!r}',
                           'an integer 0..232, the same on every robot'))
    else:
        out.append(Finding('ROS_DOMAIN_ID', 'ok', f'domain {value or "0 (unset)"}; every '
                           'robot of a fleet needs the same'))
    if _rclpy_available():
        rmw = os.environ.get('RMW_IMPLEMENTATION', '')
        distro = os.environ.get('ROS_DISTRO', '?')
        if rmw != 'rmw_cyclonedds_cpp':
            out.append(Finding('ros2', 'warn', f'ROS 2 {distro} with RMW_IMPLEMENTATION='
                               f'{rmw or "(unset: the distribution default)"}',
                               'export RMW_IMPLEMENTATION=rmw_cyclonedds_cpp on every robot '
                               '(the launch files and images set it)'))
        else:
            out.append(Finding('ros2', 'ok', f'ROS 2 {distro} with rmw_cyclonedds_cpp'))
    else:
        out.append(Finding('ros2', 'info', 'no ROS 2 (rclpy) in this Python: rog fleet and '
                           'rog robot run the same nodes on the embedded transport'))
    return out


def _rmem():
    try:
        with open(RMEM_PATH, encoding='ascii') as fh:
            value = int(fh.read().strip())
    except (OSError, ValueError):
        return []
    if value >= RMEM_WANTED:
        return [Finding('rmem_max', 'ok', f'net.core.rmem_max {value} bytes')]
    return [Finding('rmem_max', 'warn', f'net.core.rmem_max is {value} bytes; the Wi-Fi DDS '
                    f'configuration asks for {RMEM_WANTED} (bursts of row chunks overflow a '
                    'smaller buffer; local fleets do not mind)',
                    f'sudo sysctl -w net.core.rmem_max={RMEM_WANTED} (persist it in '
                    '/etc/sysctl.d/) on robots')]


def _cache():
    try:
        from rog_ros.workloads.cache import CACHE_ENV
        path = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser('~'), '.cache',
                                                         'rog_ros')
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, f'.doctor-{os.getpid()}')
        with open(probe, 'w', encoding='ascii') as fh:
            fh.write('ok')
        os.unlink(probe)
    except OSError as exc:
        return [Finding('cache', 'fail', f'cannot write the cache folder: {exc}',
                        'set ROG_CACHE_DIR to a writable folder')]
    entries = sorted(os.listdir(path))
    if any(e.startswith('mpcol-') for e in entries):
        return [Finding('cache', 'ok', f'{path}: {sum(e.endswith(".pt") for e in entries)} '
                        'cached starting checkpoints')]
    return [Finding('cache', 'info', f'{path}: no MPCOL starting policy yet; the first run '
                    'pre-trains it (about 2.5 minutes) and caches it')]


def _plots():
    try:
        importlib.import_module('matplotlib')
    except ImportError:
        return [Finding('plots', 'warn', 'no matplotlib: rog report and rog compare write '
                        'tables without plots', 'pip install matplotlib')]
    return [Finding('plots', 'ok', 'matplotlib for rog report and rog compare')]


def _machine():
    cores = os.cpu_count() or 1
    out = []
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    if load is not None and load > cores:
        out.append(Finding('cpu', 'warn', f'{cores} cores, load {load:.1f}: the machine is busy',
                           'a local fleet runs five processes; on a loaded machine its robots '
                           'fall behind each other and results vary more (let it settle, or '
                           'compare in the simulator: rog compare)'))
    else:
        shown = 'unknown' if load is None else f'{load:.1f}'
        out.append(Finding('cpu', 'ok', f'{cores} cores, load {shown}'))
    available = _mem_available_gb()
    if available is not None and available < MEMORY_WANTED_GB:
        out.append(Finding('memory', 'warn', f'{available:.1f} GB available',
                           f'a local fleet needs about {MEMORY_WANTED_GB:g} GB; fewer '
                           '--workers, or close other programs'))
    elif available is not None:
        out.append(Finding('memory', 'ok', f'{available:.1f} GB available'))
    return out


def _mem_available_gb():
    try:
        with open('/proc/meminfo', encoding='ascii') as fh:
            for line in fh:
                if line.startswith('MemAvailable:'):
                    return int(line.split()[1]) / 1024 ** 2
    except (OSError, ValueError, IndexError):
        pass
    return None


def _clock():
    if not shutil.which('timedatectl'):
        return []
    try:
        done = subprocess.run(['timedatectl', 'show', '-p', 'NTPSynchronized', '--value'],
                              capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return []
    value = done.stdout.strip()
    if done.returncode != 0 or value not in ('yes', 'no'):
        return []
    if value == 'yes':
        return [Finding('clock', 'ok', 'system clock synchronised (NTP)')]
    return [Finding('clock', 'warn', 'system clock not synchronised (NTP)',
                    'robots of one fleet need synchronised clocks for a shared trace start '
                    '(epoch) and comparable logs: enable chrony or systemd-timesyncd')]


def _fleet_key():
    try:
        from rog_ros.nodes.fleet_key import FleetKeyError, KEY_ENV, KEY_FILE_ENV, \
            load_fleet_key
    except ImportError as exc:
        return [Finding('fleet key', 'fail', f'cannot check the fleet key: {exc}')]
    try:
        key = load_fleet_key()
    except FleetKeyError as exc:
        return [Finding('fleet key', 'fail', str(exc), f'fix or unset ${KEY_FILE_ENV} / '
                        f'${KEY_ENV}; rog security key FILE writes a new one')]
    if key is None:
        return [Finding('fleet key', 'info', 'no fleet key: messages are not authenticated',
                        f'for robots on a shared network: rog security key FILE, then '
                        f'${KEY_FILE_ENV}=FILE on every robot (docs/security.md)')]
    source = KEY_FILE_ENV if os.environ.get(KEY_FILE_ENV) else KEY_ENV
    return [Finding('fleet key', 'ok', f'fleet key from ${source}')]


CHECKS = (_python, _package, _torch, _cyclonedds, _dds, _environment, _rmem, _cache, _plots,
          _machine, _clock, _fleet_key)


def diagnose(checks=None) -> list:
    """Run ``checks`` (default ``CHECKS``); one that raises becomes a failed finding."""
    found = []
    for check in CHECKS if checks is None else checks:
        try:
            found.extend(check())
        except Exception as exc:  # noqa: B902 - the report must go on past a broken check
            found.append(Finding(check.__name__.strip('_'), 'fail',
                                 f'the check itself failed: {type(exc).__name__}: {exc}'))
    return found


def format_report(found) -> str:
    """Return the findings as aligned lines, fixes indented under them, and a verdict."""
    width = max((len(f.check) for f in found), default=0)
    lines = []
    for f in found:
        lines.append(f'[{f.level:>4}] {f.check:<{width}}  {f.detail}')
        if f.fix and f.level != 'ok':
            lines.append(f'{"":7} {"":<{width}}  -> {f.fix}')
    counts = {level: sum(f.level == level for f in found) for level in LEVELS}
    verdict = ('not ready: fix the failures above' if counts['fail']
               else 'ready' + (' (see the warnings above)' if counts['warn'] else ''))
    lines.append(f'{counts["fail"]} failed, {counts["warn"]} warnings: {verdict}')
    return '\n'.join(lines)


def add_parser(sub) -> None:
    """Register ``rog doctor``."""
    p = sub.add_parser('doctor', help='check that this machine can run a fleet, with fixes',
                       description='Check Python, torch, Cyclone DDS (a real round trip), '
                                   'ROS 2 settings, kernel buffers, the cache, clocks and '
                                   'the fleet key; print one line per check and its fix. '
                                   'Exit status 1 when a check failed.')
    p.add_argument('--json', action='store_true', help='print the findings as JSON')
    p.set_defaults(func=run)


def run(args) -> int:
    """Print the report; 1 when any check failed."""
    if not args.json:
        print('rog doctor: checking this machine (a DDS round trip takes a few seconds)',
              file=sys.stderr)
    found = diagnose()
    if args.json:
        print(json.dumps([asdict(f) for f in found], indent=1))
    else:
        print(format_report(found))
    return 1 if any(f.level == 'fail' for f in found) else 0


def _child(argv) -> int:
    p = argparse.ArgumentParser(prog='python -m rog_ros.nodes.doctor')
    p.add_argument('--round-trip', required=True, metavar='CONFIG',
                   help="DdsBus configuration ('' for the environment's)")
    p.add_argument('--domain', type=int, required=True)
    args = p.parse_args(argv)
    print(json.dumps(round_trip(args.round_trip, args.domain)), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(_child(sys.argv[1:]))
