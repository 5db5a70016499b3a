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
"""Tables read at once (``columns._plain_rows``) read exactly as line by line."""

import numpy as np
import pytest
from rog_ros.net import columns, iperf, traces

HEADS = ['', 't_seconds,mbps\n', 'time_ms,rssi_dbm,throughput_kbps\n',
         'time_s;bw [Mbit/s]\n', 'time\tthroughput\n', 'ts bw\n', 'time_s,rx_bytes\n',
         '# rog_ros trace: end_s=1e9 loop=0\nt_seconds,mbps\n', 'sep=;\ntime_s;mbps\n']
"""Headers of the tables: none, units, a counter, save_trace's comment, Excel's sep line."""


def _rows(head: str, rng) -> list:
    """Return plain rows for ``head``: increasing times, rates >= 0, its separator."""
    sep = ';' if ';' in head else '\t' if '\t' in head else ' ' if 'ts bw' in head else ','
    n = int(rng.integers(2, 40))
    times = np.cumsum(rng.uniform(0.05, 2.0, n)).round(int(rng.integers(0, 4)))
    times = np.unique(times)
    rates = rng.uniform(0, 200, times.size).round(int(rng.integers(0, 5)))
    if 'rx_bytes' in head:
        rates = np.cumsum(rates * 1e5).round()
    if 'rssi' in head:
        return [f'{t * 1000:g}{sep}-6{k % 10}{sep}{r * 1000:g}\n'
                for k, (t, r) in enumerate(zip(times, rates))]
    return [f'{t!r}{sep}{r!r}\n' for t, r in zip(times.tolist(), rates.tolist())]


def _spoil(rows: list, rng) -> list:
    """Return ``rows`` with one thing the bulk reader leaves to the loop (or nothing)."""
    rows = list(rows)
    if len(rows) < 2:
        return rows
    k = int(rng.integers(1, len(rows)))
    sep = next((c for c in (';', '\t', ',') if c in rows[0]), ' ')
    fields = rows[k].rstrip('\n').split(sep if sep != ' ' else None)
    kind = int(rng.integers(0, 20))
    if kind == 1:
        rows.insert(k, '\n')                                  # a blank line inside
    elif kind == 2:
        rows.insert(k, '# a comment end_s=5\n')
    elif kind == 3:
        rows[k] = sep.join(f'"{f}"' for f in fields) + '\n'   # quoted fields
    elif kind == 4:
        rows[k] = rows[k - 1]                                 # a time repeated
    elif kind == 5:
        rows[k], rows[k - 1] = rows[k - 1], rows[k]           # out of order
    elif kind == 6:
        rows[k] = rows[k].replace(fields[-1], '-1')           # a negative rate
    elif kind == 7:
        rows[k] = rows[k].replace(fields[-1], rng.choice(['nan', 'inf', 'x', '', '1e400']))
    elif kind == 8:
        rows[-1] = rows[-1].rstrip('\n').rsplit(sep if sep != ' ' else ' ', 1)[0]  # cut short
    elif kind == 9:
        rows[k] = rows[k].replace('.', ',', 1)                # a decimal comma
    elif kind == 10:
        rows[k] = rows[k].rstrip('\n') + sep + '7\n'          # a field more
    elif kind == 11:
        rows[k] = rows[k].replace(sep, '\t' if sep != '\t' else ';', 1)   # another separator
    elif kind == 12:
        rows.extend(['\n', '  \n'])                           # blank lines at the end
    elif kind == 13:
        rows[-1] = rows[-1].rstrip('\n')                      # no line end, whole
    elif kind == 14:
        rows[k] = rows[k].replace(fields[0], '2026-11-29T08:00:00.5Z', 1)
    elif kind == 15:
        rows[k] = f'  {rows[k].rstrip()}  \n'                 # spaces around a row
    elif kind == 16:
        rows[k] = rows[k].replace(fields[-1], '1_000', 1)     # float() reads it
    elif kind == 17:
        rows[k] = rows[k].replace(fields[-1], '1e15', 1)      # one absurd sample
    return rows


def _outcome(path, monkeypatch, capsys, bulk: bool, taken=None):
    """
    Return what ``load_trace`` gives for ``path``: arrays or the error, and the warnings.

    ``bulk`` False: the rows are read line by line; else ``taken`` gets a True for every
    time the rows were read at once.
    """
    iperf._warned.clear()
    real = columns._plain_rows

    def bulk_rows(*args):
        """Read the rows at once (if ``bulk``) and note whether that was done."""
        got = real(*args) if bulk else None
        if taken is not None and got is not None:
            taken.append(True)
        return got

    monkeypatch.setattr(columns, '_plain_rows', bulk_rows)
    try:
        trace = traces.load_trace(path)
        got = (trace.t_s.tolist(), trace.mbps.tolist(), trace.end_s, trace.loop,
               trace.resolution_s)
    except (ValueError, FileNotFoundError) as exc:
        got = (type(exc).__name__, str(exc))
    monkeypatch.undo()
    return got, capsys.readouterr().err


@pytest.mark.parametrize('seed', range(12))
def test_a_table_read_at_once_reads_as_line_by_line(tmp_path, monkeypatch, capsys, seed):
    rng = np.random.default_rng(seed)
    taken = []
    for case in range(60):
        head = HEADS[case % len(HEADS)]
        rows = _rows(head, rng)
        if case % 3:
            rows = _spoil(rows, rng)
        path = tmp_path / f'{case}.csv'
        path.write_text(head + ''.join(rows))
        bulk = _outcome(path, monkeypatch, capsys, True, taken)
        assert bulk == _outcome(path, monkeypatch, capsys, False), (head + ''.join(rows))
    assert len(taken) >= 20               # the rows were read at once, not only line by line


def test_a_long_table_is_read_at_once_in_blocks(tmp_path, monkeypatch, capsys):
    # 2.4 s a million rows line by line (1.8 s of it the loop, 0.5 s the test for iperf)
    n = 3 * columns.BULK_ROWS + 5
    path = tmp_path / 'big.csv'
    rows = ''.join(f'{100 * k},{k % 997}\n' for k in range(n))
    path.write_text(f'time_ms,throughput_kbps\n{rows}\n')
    taken = []
    bulk = _outcome(path, monkeypatch, capsys, True, taken)
    assert taken == [True] and len(bulk[0][0]) == n
    assert bulk == _outcome(path, monkeypatch, capsys, False)
    assert bulk[0][1][:3] == [0.0, 0.001, 0.002]


def test_lines_end_where_a_text_files_reader_ends_them(tmp_path):
    # io.StringIO held a 229 MB table as four bytes a character (1.6 GB at its peak); str's
    # own splitlines also ends lines at form feeds, vertical tabs, U+2028 and more
    import io
    rng = np.random.default_rng(5)
    alphabet = ['a', '1', ',', '\n', '\r', '\r\n', '\x0b', '\x0c', '\x1c', '\x85', '\u2028',
                ' ', '\t', '\u00e9']
    path = tmp_path / 'text.csv'
    for _ in range(400):
        text = ''.join(rng.choice(alphabet, int(rng.integers(0, 30))).tolist())
        path.write_bytes(text.encode('utf-8'))
        assert traces._read_lines(path) == io.StringIO(text, newline=None).readlines()


def test_the_block_test_for_iperf_sees_an_interval_in_any_scripts_digits():
    # iperf2 -y C's interval is matched with re's \d, which takes Arabic-Indic digits (and
    # float() reads them): the block test looked for ASCII digits only
    lines = ['time,mbps\n', '0,1\n', 'a,b,c,d,e,f,\u0661-\u0662,h,5\n']
    one_by_one = any(iperf._LINE.search(line) or iperf._csv_fields(line.strip()) is not None
                     for line in lines)
    assert one_by_one and iperf.is_iperf(lines)
    assert not iperf.is_iperf(['time,mbps\n', '0,1\n', 'a,b,c,d,e,f,\u0661\u0662,h,5\n'])


@pytest.mark.parametrize('spoil', ['cut', 'comment', 'repeat'])
def test_a_long_table_with_a_row_the_loop_must_read_is_read_at_once_up_to_it(
        tmp_path, monkeypatch, capsys, spoil):
    # a logger that crashed mid-line (or a comment, a repeated time, late in the file): every
    # row went through the loop, after the blocks before it had been read at once for nothing
    # (twice the time of the loop alone)
    n = 3 * columns.BULK_ROWS + 5
    rows = [f'{100 * k},{k % 997}\n' for k in range(n)]
    if spoil == 'cut':
        rows[-1] = rows[-1].split(',')[0] + ','
    elif spoil == 'comment':
        rows.insert(2 * columns.BULK_ROWS + 7, '# moved the robot\n')
    else:
        rows.insert(2 * columns.BULK_ROWS + 7, rows[2 * columns.BULK_ROWS + 6])
    path = tmp_path / 'big.csv'
    path.write_text('time_ms,throughput_kbps\n' + ''.join(rows))
    taken = []
    bulk = _outcome(path, monkeypatch, capsys, True, taken)
    assert taken == [True]
    assert bulk == _outcome(path, monkeypatch, capsys, False)
    assert len(bulk[0][0]) == (n - 1 if spoil == 'cut' else n)
    assert bool(bulk[1]) == (spoil != 'comment')       # cut short, rows merged: a warning
