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
The checks of ``rog doctor`` that look at this machine: one function per thing a fleet needs.

Each returns a list of ``Finding`` rows (empty when there is nothing to say, as the receive
buffer check where ``/proc`` cannot be read) and may raise; ``doctor.diagnose`` turns a raise
into a failed row. The DDS round trips are in ``doctor_dds`` (they need a child process).
"""

from __future__ import annotations

from dataclasses import dataclass
import importlib
import os
import re
import shutil
import subprocess
import sys

from rog_ros.transport.choose import BUS_KINDS as ROG_BUS_KINDS
from rog_ros.transport.cyclone_config import MAX_DOMAIN_ID

RMEM_PATH = '/proc/sys/net/core/rmem_max'
RMEM_WANTED = 8 * 1024 * 1024
"""Receive buffer the shipped Cyclone configurations ask for (config/cyclonedds_*.xml)."""
MEMORY_WANTED_GB = 2.0
"""A local fleet (server, three robots, netmon, each with torch) needs about this much."""
TEGRA_RELEASE = '/etc/nv_tegra_release'
"""Present on a Jetson (L4T); torch's version names NVIDIA's wheels with ``nv``."""


@dataclass
class Finding:
    """One line of the report: what was checked, how it stands, and what to do about it."""

    check: str
    level: str
    detail: str
    fix: str = ''


def check_python():
    version = '.'.join(map(str, sys.version_info[:3]))
    if sys.version_info < (3, 8):
        return [Finding('python', 'fail', f'Python {version}', 'rog_ros needs Python 3.8 or '
                        'newer (JetPack 5 ships 3.8; setup.sh makes a 3.11 .venv)')]
    return [Finding('python', 'ok', f'Python {version} ({sys.executable})')]


def _version_tuple(text: str) -> tuple:
    return tuple(int(p) for p in re.findall(r'\d+', text.split('+')[0])[:2])


def check_torch():
    try:
        torch = importlib.import_module('torch')
    except ImportError as exc:
        return [Finding('torch', 'fail', f'cannot import torch ({exc})',
                        'bash setup.sh, or pip install torch==2.13.0 (CPU); on a Jetson, '
                        "NVIDIA's wheel for your JetPack")]
    version = torch.__version__
    if _version_tuple(version) < (2, 0):
        return [Finding('torch', 'fail', f'torch {version}', 'rog_ros needs torch 2.0 or newer')]
    threads = torch.get_num_threads()
    if torch.cuda.is_available():   # where workers compute with the default device: auto
        device = f'CUDA: {torch.cuda.get_device_name(0)}; workers compute gradients there'
    elif _on_jetson(version):
        return [Finding('torch', 'warn', f'torch {version} sees no GPU on this Jetson: '
                        f'training would run on the CPU ({threads} threads), many times slower',
                        "NVIDIA's torch wheel for your JetPack (pip install torch replaces it "
                        'with a CPU build); in a container, start it with the NVIDIA runtime: '
                        'docker run --runtime nvidia')]
    else:
        device = 'CPU only'
    return [Finding('torch', 'ok', f'torch {version} ({device}; {threads} threads)')]


def _on_jetson(torch_version: str) -> bool:
    """Tell whether this is a Jetson: L4T's release file, or NVIDIA's torch wheel."""
    return os.path.exists(TEGRA_RELEASE) or 'nv' in torch_version


def _rclpy_available() -> bool:
    try:
        importlib.import_module('rclpy')
    except ImportError:
        return False
    return True


def binding_unusable(exc: BaseException) -> bool:
    """
    Tell whether ``exc``, raised by importing the Cyclone DDS binding, means it cannot be used.

    An ImportError (no binding), or the binding's ``CycloneDDSLoaderException`` (an Exception
    only: a binding built from source whose C library, libddsc, is not where
    ``CYCLONEDDS_HOME`` says). Matched by name: its module may be the one that failed.
    """
    return isinstance(exc, ImportError) or any(
        cls.__name__ == 'CycloneDDSLoaderException' for cls in type(exc).__mro__)


def cyclone_unusable() -> bool:
    """
    Tell whether the Cyclone DDS binding cannot be imported (the cyclonedds check says why).

    For the checks that need it (dds round trips, the ROS 2 graph): they find nothing to say
    where it is unusable. An exception of another kind is raised (a bug, not a set-up).
    """
    try:
        importlib.import_module('cyclonedds.domain')
    except Exception as exc:  # noqa: B902 - the binding's loader raises its own exception
        if not binding_unusable(exc):
            raise
        return True
    return False


def check_cyclonedds():
    try:
        module = importlib.import_module('cyclonedds')
        importlib.import_module('cyclonedds.domain')
    except Exception as exc:  # noqa: B902 - the binding's loader raises a bare Exception
        if not binding_unusable(exc):
            raise
        level = 'warn' if _rclpy_available() else 'fail'
        after = 'without it only ROS 2 (rclpy) nodes can run, and rog fleet cannot'
        if isinstance(exc, ImportError):
            return [Finding('cyclonedds', level, f'cannot import the Cyclone DDS binding '
                            f'({exc})', f'pip install cyclonedds (setup.sh does); {after}')]
        home = os.environ.get('CYCLONEDDS_HOME')
        return [Finding('cyclonedds', level, 'the Cyclone DDS binding is installed but cannot '
                        f'load its C library ({exc}; CYCLONEDDS_HOME='
                        f'{home if home is not None else "(unset)"})',
                        'set CYCLONEDDS_HOME to the prefix whose lib/ holds libddsc.so (on ROS '
                        '2: /opt/ros/$ROS_DISTRO) and build the binding with it set: pip '
                        'install --no-binary cyclonedds cyclonedds (the L4T image does); '
                        f'{after}')]
    version = getattr(module, '__version__', None) or _distribution_version('cyclonedds')
    return [Finding('cyclonedds', 'ok', f'cyclonedds {version} (the embedded transport)')]


def _distribution_version(name: str) -> str:
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:  # noqa: B902 - PackageNotFoundError, or no metadata in a source tree
        return '(version unknown)'


def check_package():
    import rog_ros
    where = os.path.dirname(os.path.dirname(os.path.abspath(rog_ros.__file__)))
    return [Finding('rog_ros', 'ok', f'rog_ros {rog_ros.__version__} from {where}')]


def check_environment():
    out = []
    value = os.environ.get('ROS_DOMAIN_ID', '').strip()
    if value and not (value.isdigit() and 0 <= int(value) <= MAX_DOMAIN_ID):
        out.append(Finding('ROS_DOMAIN_ID', 'fail', f'ROS_DOMAIN_ID={value!r}',
                           f'an integer 0..{MAX_DOMAIN_ID}, the same on every robot'))
    else:
        out.append(Finding('ROS_DOMAIN_ID', 'ok', f'domain {value or "0 (unset)"}; every '
                           'robot of a fleet needs the same'))
    out.extend(_check_rog_bus())
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
        from rog_ros.transport.choose import rclpy_available
        if not rclpy_available():
            out.append(Finding('ros2 interfaces', 'warn', 'rclpy imports but the rog_ros '
                               'messages do not: the nodes fall back to the embedded transport',
                               'colcon build --packages-select rog_ros, then source '
                               'install/setup.bash'))
    else:
        out.append(Finding('ros2', 'info', 'no ROS 2 (rclpy) in this Python: rog fleet and '
                           'rog robot run the same nodes on the embedded transport'))
        if os.environ.get('ROS_SECURITY_ENABLE', '').strip().lower() == 'true':
            # SROS2 is the ROS 2 transport's; asked for here, it would be silently absent
            out.append(Finding('ROS_SECURITY_ENABLE', 'warn', 'ROS_SECURITY_ENABLE=true, but '
                               'the embedded transport has no DDS Security: messages are '
                               'signed with the fleet key (HMAC), not encrypted',
                               'run the nodes under ROS 2 for SROS2 (docs/security.md), or '
                               'rely on the fleet key and unset ROS_SECURITY_ENABLE'))
    return out


def _check_rog_bus() -> list:
    """
    Return a row for ``$ROG_BUS`` when set: a value the nodes refuse fails here already.

    ``ROG_BUS=rclpy`` is judged by the nodes' own test (``ros_node.missing_ros``, which
    ``node_main.ros_path`` refuses it with): on a ROS 2 without ``rclpy.lifecycle`` (Foxy,
    Galactic) it was reported ok while rog_server and rog_worker stopped with a usage error.
    """
    if 'ROG_BUS' not in os.environ:
        return []
    value = os.environ['ROG_BUS']
    if value not in ROG_BUS_KINDS:
        return [Finding('ROG_BUS', 'fail', f'ROG_BUS={value!r}: rog robot and every node '
                        f'would stop at start with "unknown bus kind {value!r}"',
                        f'unset ROG_BUS, or one of {", ".join(ROG_BUS_KINDS)} (exactly, lower '
                        'case)')]
    if value == 'rclpy':
        from rog_ros.nodes.ros_node import missing_ros
        if missing_ros(lifecycle=False) is not None:      # no node can be an rclpy node
            return [Finding('ROG_BUS', 'fail', 'ROG_BUS=rclpy, but rclpy and the rog_ros '
                            'messages do not import here: rog robot and every node would stop '
                            'at start with "ROG_BUS=rclpy: rclpy or the built rog_ros messages '
                            'do not import"',
                            'source the ROS 2 install and the built rog_ros (install/'
                            'setup.bash), or unset ROG_BUS')]
        missing = missing_ros(lifecycle=True)
        if missing is not None:     # netmon, a plain node, would run; the training nodes not
            return [Finding('ROG_BUS', 'fail', f'ROG_BUS=rclpy, but {missing}; they (and rog '
                            'robot) would stop at start with a usage error',
                            'unset ROG_BUS or set ROG_BUS=dds: the nodes then run on the '
                            'embedded transport (the same ROS 2 topics and types)')]
    return [Finding('ROG_BUS', 'ok', f'ROG_BUS={value}: the nodes use this transport')]


def check_rmem():
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


def check_cache():
    from rog_ros.workloads import cache     # no torch needed: that is the torch check's
    path = cache.cache_dir_name()
    try:
        os.makedirs(path, exist_ok=True)
        probe = os.path.join(path, f'.doctor-{os.getpid()}')
        with open(probe, 'w', encoding='ascii') as fh:
            fh.write('ok')
        os.unlink(probe)
    except OSError as exc:
        # not a failure: runs then cache in the system's temporary folder (workloads/cache.py)
        return [_unwritable_cache(path, exc, cache)]
    entries = sorted(os.listdir(path))
    if any(e.startswith('mpcol-') for e in entries):
        return [Finding('cache', 'ok', f'{path}: {sum(e.endswith(".pt") for e in entries)} '
                        'cached starting checkpoints')]
    return [Finding('cache', 'info', f'{path}: no MPCOL entry yet; the first run makes its '
                    'data and takes the shipped pre-trained start (seconds; other workload '
                    'options pre-train, about a minute) and caches them')]


def _unwritable_cache(path: str, exc: OSError, cache) -> Finding:
    """Return the row for a cache folder ``path`` that cannot be made or written (``exc``)."""
    reason = exc.strerror or type(exc).__name__
    fallback = cache.fallback_dir()
    if fallback.exists() and not cache.fallback_private():
        return Finding('cache', 'warn', f'cannot write the cache folder {path} ({reason}), and '
                       f'{fallback} is not private to this user: every run prepares its '
                       "workload again at each node start (seconds for MPCOL's and EACOL's "
                       'shipped starts, a minute or more where other options pre-train)',
                       'set ROG_CACHE_DIR to a writable folder')
    try:
        held = sum(e.endswith('.pt') for e in os.listdir(path))
    except OSError:                         # not made, or not even readable
        held = 0
    return Finding('cache', 'warn', f'cannot write the cache folder {path} ({reason}): runs '
                   + (f'read the entries it holds ({held}), and ' if held else '')
                   + 'cache their pre-trained checkpoints in the temporary folder instead '
                   f'({fallback}; one warning per run; emptied at a reboot on most systems, '
                   'then pre-training again)', 'set ROG_CACHE_DIR to a writable folder')


def check_netns():
    from rog_ros.net import netns
    reason = netns.unavailable_reason()
    if reason is not None:
        return [Finding('netns', 'info', f'rog fleet --netns {reason}; the default '
                        'application-level shaping needs neither')]
    try:                    # root and iproute2 are not enough: the kernel's qdiscs shape
        shaping = netns.shaping_unavailable_reason()
    except netns.NetnsError as err:
        return [Finding('netns', 'warn', f'rog fleet --netns could not try its shaping in a '
                        f'namespace of its own: {err}', 'the default application-level '
                        'shaping needs no namespace')]
    if shaping is not None:
        return [Finding('netns', 'info', f'rog fleet --netns cannot shape here: {shaping}; '
                        'the default application-level shaping needs no qdisc')]
    return [Finding('netns', 'ok', 'kernel link emulation available (rog fleet --netns: '
                    'namespaces, tbf and htb tried)')]


def check_plots():
    try:
        importlib.import_module('matplotlib')
    except ImportError:
        return [Finding('plots', 'warn', 'no matplotlib: rog report and rog compare write '
                        'tables without plots', 'pip install matplotlib')]
    return [Finding('plots', 'ok', 'matplotlib for rog report and rog compare')]


def check_machine():
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
    available = mem_available_gb()
    if available is not None and available < MEMORY_WANTED_GB:
        out.append(Finding('memory', 'warn', f'{available:.1f} GB available',
                           f'a local fleet needs about {MEMORY_WANTED_GB:g} GB; fewer '
                           '--workers, or close other programs'))
    elif available is not None:
        out.append(Finding('memory', 'ok', f'{available:.1f} GB available'))
    return out


def mem_available_gb(root: str = '/'):
    """
    Return the memory this process has available in GB (None where /proc says nothing).

    /proc/meminfo's MemAvailable, or less where a memory cgroup's limit leaves less room (a
    container's ``--memory``: ``memory.max``, v1's ``memory.limit_in_bytes``, of this
    process's cgroup or one above it): in a container MemAvailable is the host's, while its
    out-of-memory killer ends a node at the container's limit. ``root``: where /proc and
    /sys are found (a test's folder).
    """
    available = None
    try:
        with open(os.path.join(root, 'proc', 'meminfo'), encoding='ascii') as fh:
            for line in fh:
                if line.startswith('MemAvailable:'):
                    available = int(line.split()[1]) / 1024 ** 2
                    break
    except (OSError, ValueError, IndexError):
        pass
    room = _cgroup_room_gb(root)
    return room if available is None else available if room is None else min(available, room)


def _cgroup_room_gb(root: str):
    """
    Return the room left under this process's memory cgroup limits in GB (None: no limit).

    Each cgroup from this process's own up to the hierarchy's root counts (a limit above
    applies too); its page cache that the kernel can drop (``inactive_file``) is room.
    """
    try:
        with open(os.path.join(root, 'proc', 'self', 'cgroup'), encoding='ascii') as fh:
            lines = fh.read().splitlines()
    except (OSError, ValueError):
        return None
    rooms = []
    for line in lines:
        parts = line.split(':', 2)
        if len(parts) != 3:
            continue
        if parts[0] == '0' and not parts[1]:
            base = ('sys', 'fs', 'cgroup')
            names = ('memory.max', 'memory.current', 'inactive_file')
        elif 'memory' in parts[1].split(','):
            base = ('sys', 'fs', 'cgroup', 'memory')
            names = ('memory.limit_in_bytes', 'memory.usage_in_bytes', 'total_inactive_file')
        else:
            continue
        rel = parts[2].strip('/')
        while True:
            room = _cgroup_folder_room(os.path.join(root, *base, rel), *names)
            if room is not None:
                rooms.append(room)
            if not rel:
                break
            rel = os.path.dirname(rel)
    return min(rooms) / 1024 ** 3 if rooms else None


def _cgroup_folder_room(folder: str, limit_name: str, usage_name: str, inactive_key: str):
    """Return the bytes one cgroup's limit leaves (None: no limit, or no such cgroup here)."""
    try:
        with open(os.path.join(folder, limit_name), encoding='ascii') as fh:
            limit = fh.read().strip()
        if limit == 'max' or int(limit) >= 2 ** 60:      # v1 says 'none' with 2**63 - 4096
            return None
        with open(os.path.join(folder, usage_name), encoding='ascii') as fh:
            usage = int(fh.read().strip())
    except (OSError, ValueError):
        return None
    inactive = 0
    try:
        with open(os.path.join(folder, 'memory.stat'), encoding='ascii') as fh:
            for line in fh:
                key, _, value = line.partition(' ')
                if key == inactive_key:
                    inactive = int(value)
    except (OSError, ValueError):
        pass
    return max(0, int(limit) - max(0, usage - inactive))


def check_clock():
    if not shutil.which('timedatectl'):
        return [_clock_unknown('no timedatectl here')]
    try:
        done = subprocess.run(['timedatectl', 'show', '-p', 'NTPSynchronized', '--value'],
                              capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError) as exc:
        return [_clock_unknown(f'timedatectl: {type(exc).__name__}')]
    value = done.stdout.strip()
    if done.returncode != 0 or value not in ('yes', 'no'):
        said = ((done.stderr or done.stdout).strip().splitlines() or [''])[0][:100].rstrip('.')
        return [_clock_unknown(f'timedatectl show: {said or f"status {done.returncode}"}')]
    if value == 'yes':
        return [Finding('clock', 'ok', 'system clock synchronised (NTP)')]
    return [Finding('clock', 'warn', 'system clock not synchronised (NTP)',
                    'robots of one fleet need synchronised clocks for a shared trace start '
                    '(epoch) and comparable logs: enable chrony or systemd-timesyncd')]


def _clock_unknown(why: str) -> Finding:
    """Return the row for a clock whose synchronisation cannot be read here (``why``)."""
    return Finding('clock', 'info', f'clock synchronisation could not be checked here ({why}; '
                   'a container without systemd shares the host clock)',
                   'on the host: timedatectl show -p NTPSynchronized --value (yes), or '
                   'chronyc tracking')


def check_fleet_key():
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
        return [Finding('fleet key', 'info', f'no fleet key in ${KEY_FILE_ENV} or ${KEY_ENV}: '
                        'rog fleet makes one per run; rog robot and ROS 2 nodes run '
                        'unauthenticated without one',
                        f'for robots on a shared network: rog security key FILE, then '
                        f'export {KEY_FILE_ENV}=FILE on every robot (docs/security.md)')]
    source = KEY_FILE_ENV if os.environ.get(KEY_FILE_ENV) else KEY_ENV
    if key.robot is not None:      # (robot_keys: docs/security.md)
        return [Finding('fleet key', 'ok', f"robot {key.robot}'s key from ${source} "
                                           f'(fingerprint {key.fingerprint}, made from fleet '
                                           f'key {key.fleet_fingerprint}): give this robot '
                                           f'--rank {key.robot} and every node --robot-keys '
                                           'true')]
    return [Finding('fleet key', 'ok', f'fleet key from ${source} (fingerprint '
                                       f'{key.fingerprint})')]
