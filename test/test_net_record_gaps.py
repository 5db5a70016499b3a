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
"""Gaps in the real records of every format with timestamps are warned about, as in tables."""

import pytest
from rog_ros.net import traces

SAR_HEADER = ('IFACE   rxpck/s   txpck/s    rxkB/s    txkB/s   rxcmp/s   txcmp/s  rxmcst/s   '
              '%ifutil')


def _sar(seconds) -> str:
    """Return a ``sar -n DEV 1`` report of wlan0 at 10:00 plus ``seconds``, 1250 kB/s each."""
    lines = ['Linux 5.15.0-91-generic (robot1) \t12/16/2019 \t_x86_64_\t(4 CPU)', '',
             f'10:00:00     {SAR_HEADER}']
    for s in seconds:
        lines.append(f'10:{s // 60:02d}:{s % 60:02d}     wlan0  1.00  2.00  1250.00  1.00  0.00  '
                     '0.00  0.00  0.00')
    return '\n'.join(lines) + '\n'


def _hsdpa(seconds) -> str:
    """Return an HSDPA drive log with a line at each of ``seconds`` (125000 bytes a second)."""
    return ''.join(f'{1289406399 + s} {549692 + 1000 * s} 59.85 10.78 125000 1000\n'
                   for s in seconds)


def _iperf(starts) -> str:
    """Return iperf3 text output with 1 s intervals at ``starts``, 10 Mbit/s each."""
    return ''.join(f'[  5]   {a:.2f}-{a + 1:.2f}   sec  1.19 MBytes  10.0 Mbits/sec\n'
                   for a in starts)


def _replay(seconds, stops=None) -> str:
    """Return a testbed replay log with rates at ``seconds`` (``{second: hold}`` after them)."""
    out = ['wnic_name wlan0']
    for s in seconds:
        out.append(f'2022-06-25 10:{s // 60:02d}:{s % 60:02d},000 5.0')
        if s in (stops or {}):
            out.append(f'Stop for {stops[s]} seconds')
    return '\n'.join(out) + '\n'


STEADY = list(range(8))
GAPPED = list(range(4)) + list(range(300, 304))      # the logger stopped for about 5 minutes
CASES = [
    ('dev.txt', _sar, 'sar -n DEV report', 'sar was stopped or restarted'),
    ('bus.log', _hsdpa, 'HSDPA log', 'the bytes of the line after it are spread over it'),
    ('link.txt', _iperf, 'iperf report', 'the report has no interval then'),
    ('bw_replay-1.txt', _replay, 'testbed replay log', 'beyond its "Stop for N seconds"'),
]


@pytest.mark.parametrize('name, write, kind, advice', CASES, ids=[c[2] for c in CASES])
def test_a_gap_in_a_timestamped_record_is_warned_about_once(tmp_path, capsys, name, write,
                                                            kind, advice):
    # only tables and bags warned; a drive log, a sar report, an iperf report or a replay log
    # that stopped for minutes held one rate through them without a word
    path = tmp_path / name
    path.write_text(write(STEADY))
    assert traces.trace_file_format(path) == kind
    traces.load_trace(path)
    assert capsys.readouterr().err == ''
    path.write_text(write(GAPPED))
    traces.load_trace(path)
    err = ' '.join(capsys.readouterr().err.split())
    assert err.count('warning:') == 1, err
    assert f'{path}: no sample for 297 s after t=' in err, err
    assert 'is held through it' in err and advice in err, err


def test_a_replay_logs_announced_holds_are_no_gap(tmp_path, capsys):
    # the testbed held a rate 10-90 s on purpose and logged it ("Stop for N seconds")
    path = tmp_path / 'bw_replay-2.txt'
    path.write_text(_replay(GAPPED, {3: 296}))
    traces.load_trace(path)
    assert capsys.readouterr().err == ''
    path.write_text(_replay(GAPPED, {3: 100}))
    traces.load_trace(path)
    err = ' '.join(capsys.readouterr().err.split())
    assert f'{path}: no sample for 197 s (beyond the hold it logged) after t=3 s' in err, err
