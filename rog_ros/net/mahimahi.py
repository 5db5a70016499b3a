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
Read Mahimahi packet-delivery traces (``mm-link``'s format) as rate traces.

Most public records of real wireless links (cellular and Wi-Fi captures recorded with the
Saturator tool, the Pantheon and Puffer traces) are in this format: one integer per line, the
millisecond at which one MTU-sized packet (1,500 bytes) could cross the link, repeated when
several could, and the file wraps around at its last timestamp. ``load_trace`` recognises such
a file and turns it into Mbit/s over bins of ``BIN_S`` (packet counts per bin, so no byte is
gained or lost), which keeps the sub-second swings Wi-Fi has and that ATP reacts to.
"""

from __future__ import annotations

import numpy as np

PACKET_BITS = 1500 * 8
"""One delivery opportunity carries one MTU-sized packet."""

BIN_S = 0.1
"""Width of the rate bins: a 2 Mbit/s link still delivers 17 packets per bin."""


def is_mahimahi(lines) -> bool:
    """Tell whether ``lines`` look like a Mahimahi trace: the first data line is one integer."""
    for line in lines:
        text = line.strip()
        if text and not text.startswith('#'):
            return text.isdigit()
    return False


def read_mahimahi(path, lines, bin_s: float = BIN_S) -> tuple:
    """
    Return ``(times_s, rates_mbps, end_s)`` of a Mahimahi trace's lines.

    The period is the last timestamp (at least 1 ms), as ``mm-link`` wraps; the last bin may be
    shorter than ``bin_s``. A line that is not one integer, or a timestamp that goes back,
    raises ``ValueError`` naming the line.
    """
    stamps = []
    for lineno, raw in enumerate(lines, 1):
        text = raw.strip()
        if not text or text.startswith('#'):
            continue
        if not text.isdigit():
            raise ValueError(f'{path}:{lineno}: read as a Mahimahi trace (its first line is one '
                             f'integer), which has one integer (ms) per line; got {text[:60]!r}')
        ms = int(text)
        if stamps and ms < stamps[-1]:
            raise ValueError(f'{path}:{lineno}: timestamp {ms} ms goes back (previous '
                             f'{stamps[-1]} ms)')
        stamps.append(ms)
    if not stamps:
        raise ValueError(f'{path}: no packet delivery opportunities')
    period_ms = max(stamps[-1], 1)
    bin_ms = min(bin_s * 1000.0, float(period_ms))
    n_bins = int(np.ceil(period_ms / bin_ms - 1e-9))
    index = np.minimum((np.asarray(stamps, dtype=np.float64) // bin_ms).astype(np.int64),
                       n_bins - 1)
    counts = np.bincount(index, minlength=n_bins)
    starts_ms = np.arange(n_bins) * bin_ms
    widths_ms = np.minimum(starts_ms + bin_ms, period_ms) - starts_ms
    rates = counts * PACKET_BITS / (widths_ms * 1e3)     # bits per ms / 1e3 = Mbit/s
    return (starts_ms / 1e3).tolist(), rates.tolist(), period_ms / 1e3
