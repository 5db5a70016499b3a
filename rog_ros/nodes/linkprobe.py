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
Link probes: interface byte counters from /proc/net/dev and the Wi-Fi link from ``iw``.

What ``netmon`` measures. The parsers are pure functions of the text (unit-tested with
captured output); the readers only fetch the text. ``iw`` is optional: without it, or on a
wired/emulated interface, bitrate and signal stay unknown.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

PROC_NET_DEV = '/proc/net/dev'
_IW_BITRATE = re.compile(r'tx bitrate:\s*([0-9.]+)\s*MBit/s')
_IW_SIGNAL = re.compile(r'signal:\s*(-?[0-9.]+)\s*dBm')


def parse_net_dev(text: str) -> dict:
    """Return ``{interface: (rx_bytes, tx_bytes)}`` from /proc/net/dev text."""
    out = {}
    for line in text.splitlines()[2:]:
        if ':' not in line:
            continue
        name, rest = line.split(':', 1)
        fields = rest.split()
        if len(fields) >= 9:
            out[name.strip()] = (int(fields[0]), int(fields[8]))
    return out


def read_counters(path: str = PROC_NET_DEV) -> dict:
    """Read the current counters of every interface."""
    with open(path, encoding='ascii') as fh:
        return parse_net_dev(fh.read())


def parse_iw_link(text: str) -> tuple:
    """Return ``(bitrate_mbps, signal_dbm)`` from ``iw dev IF link``; -1.0 / 0.0 when unknown."""
    bitrate = _IW_BITRATE.search(text)
    signal = _IW_SIGNAL.search(text)
    return (float(bitrate.group(1)) if bitrate else -1.0,
            float(signal.group(1)) if signal else 0.0)


def is_wireless(interface: str) -> bool:
    """Tell whether the kernel calls ``interface`` a wireless device."""
    return os.path.isdir(f'/sys/class/net/{interface}/wireless')


def iw_link(interface: str, timeout_s: float = 1.0) -> tuple:
    """Bitrate and signal of a Wi-Fi interface via ``iw`` (unknown without iw / not Wi-Fi)."""
    exe = shutil.which('iw')
    if exe is None or not is_wireless(interface):
        return -1.0, 0.0
    try:
        proc = subprocess.run([exe, 'dev', interface, 'link'], capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return -1.0, 0.0
    return parse_iw_link(proc.stdout)


def default_interface(counters: dict) -> str:
    """Pick a wireless interface if there is one, else the busiest non-loopback one, else lo."""
    names = sorted(counters)
    wireless = [n for n in names if is_wireless(n)]
    if wireless:
        return wireless[0]
    others = [n for n in names if n != 'lo']
    if others:
        return max(others, key=lambda n: sum(counters[n]))
    return 'lo'


class RateMeter:
    """Mbit/s from successive counter readings (pure: the caller passes times)."""

    def __init__(self):
        self._last = None

    def update(self, t_s: float, rx_bytes: int, tx_bytes: int) -> tuple:
        """Return ``(rx_mbps, tx_mbps)`` since the previous reading (0, 0 on the first)."""
        last, self._last = self._last, (t_s, rx_bytes, tx_bytes)
        if last is None or t_s <= last[0]:
            return 0.0, 0.0
        dt = t_s - last[0]
        # counters may wrap or reset (interface re-created): never report negative rates
        return (max(0, rx_bytes - last[1]) * 8e-6 / dt, max(0, tx_bytes - last[2]) * 8e-6 / dt)
