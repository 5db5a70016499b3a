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
"""``sar -n DEV`` reports read as traces: the interface, the direction, the times of day."""

import pytest
from rog_ros.net import traces
from rog_ros.net.traces import TraceFormatError

_HEADER = ('IFACE   rxpck/s   txpck/s    rxkB/s    txkB/s   rxcmp/s   txcmp/s  rxmcst/s   '
           '%ifutil')


def _report(rows, clock=lambda k: f'11:59:{58 + k:02d} PM' if k < 2 else f'12:00:0{k - 2} AM'):
    """Return a ``sar -n DEV 1`` report: ``rows`` of ``{interface: (rxkB/s, txkB/s)}``."""
    lines = ['Linux 5.15.0-91-generic (robot1) \t12/16/2019 \t_x86_64_\t(4 CPU)', '',
             f'{clock(0)}     {_HEADER}']
    for k, block in enumerate(rows, 1):
        lines += [f'{clock(k)}  {name:>8}  1.00  2.00  {rx:.2f}  {tx:.2f}  0.00  0.00  0.00  0.00'
                  for name, (rx, tx) in block.items()]
        lines.append('')
    lines += [f'Average:        {_HEADER}', 'Average:        lo  0.00  0.00  0.00  0.00  0.00  '
              '0.00  0.00  0.00']
    return '\n'.join(lines) + '\n'


def test_a_sar_report_reads_its_wifi_interface_across_midnight(tmp_path):
    path = tmp_path / 'dev.txt'
    rows = [{'lo': (0.0, 0.0), 'wlan0': (rx, tx)}
            for rx, tx in ((1250.0, 10.0), (20.0, 625.0), (0.0, 0.0), (2500.0, 1.0))]
    path.write_text(_report(rows))
    assert traces.trace_file_format(path) == 'sar -n DEV report'
    tr = traces.load_trace(path)
    assert tr.t_s.tolist() == [0.0, 1.0, 2.0, 3.0] and tr.end_s == 4.0   # 23:59:58 to 00:00:02
    assert tr.mbps.tolist() == pytest.approx([10.0, 5.0, 0.0, 20.0])     # kB/s x 8 / 1000


def test_a_24_hour_report_with_several_interfaces_takes_the_wifi_one(tmp_path):
    path = tmp_path / 'dev.txt'
    rows = [{'eth0': (9000.0, 9000.0), 'wlp2s0': (125.0 * k, 0.0), 'lo': (1.0, 1.0)}
            for k in (1, 2, 3)]
    path.write_text(_report(rows, clock=lambda k: f'13:00:{k * 2:02d}'))
    tr = traces.load_trace(path)
    assert tr.t_s.tolist() == [0.0, 2.0, 4.0] and tr.mbps.tolist() == [1.0, 2.0, 3.0]


def test_a_report_whose_interface_is_open_is_refused_naming_them(tmp_path):
    path = tmp_path / 'dev.txt'
    path.write_text(_report([{'eth0': (1.0, 1.0), 'eth1': (2.0, 2.0)}] * 2))
    with pytest.raises(TraceFormatError, match=r'dev.txt: a sar -n DEV report of 2 interfaces '
                                               r'\(eth0, eth1\).*grep'):
        traces.load_trace(path)


def test_a_damaged_line_of_a_report_is_refused_naming_it(tmp_path):
    path = tmp_path / 'dev.txt'
    text = _report([{'wlan0': (1.0, 1.0)}] * 3).replace('2.00  1.00  1.00', '2.00  x  1.00', 1)
    path.write_text(text)
    with pytest.raises(TraceFormatError, match=r'dev.txt:4: expected a time, an interface and '
                                               r'8 numbers'):
        traces.load_trace(path)


def test_a_report_in_a_decimal_comma_locale_reads(tmp_path):
    # sar under LANG=de_DE.UTF-8 writes 1187,53
    path = tmp_path / 'dev.txt'
    text = _report([{'wlan0': (1250.0, 0.0)}, {'wlan0': (625.0, 0.0)}],
                   clock=lambda k: f'13:00:{k:02d}')
    path.write_text(text.replace('.', ','))
    assert traces.load_trace(path).mbps.tolist() == pytest.approx([10.0, 5.0])
