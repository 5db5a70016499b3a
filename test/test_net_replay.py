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
"""Tests of the testbed's replay of a record (rog_ros.net.replay) and ``rog trace replay``."""

import argparse
import io
import random

import numpy as np
import pytest

from rog_ros.net import cli_trace, traces
from rog_ros.net import replay as replay_module
from rog_ros.net.replay import replay


def _record(n=10, step=0.5):
    """Make a record with distinct rates (1, 2, ..., n Mbit/s): each segment names its step."""
    return traces.Trace(np.arange(n) * step, np.arange(1.0, n + 1), n * step)


def _testbed(n, rank, step=0.5, scale=0.7):
    """specs/rog_artifact.md 5.1 written out step by step: (rate, seconds) per segment."""
    rnd = random.Random(rank + 2)
    idx = int(n / 6 * rank)
    out = []
    for _ in range(n - 2):
        seconds = step
        if rnd.randint(1, 20) > 10:
            seconds += rnd.randint(10, 90)
        out.append(((idx + 1) * scale, seconds))
        idx += 1
        if idx == n - 2:      # the script wrapped to 0 two entries before the end
            idx = 0
    return out


@pytest.mark.parametrize('rank', [0, 1, 2, 3, 4])   # the testbed's ranks
def test_replay_is_the_testbeds_draw_for_draw(rank):
    got = replay(_record(), rank=rank)
    want = _testbed(10, rank)
    assert got.mbps.tolist() == pytest.approx([r for r, _ in want])
    lengths = np.diff(np.append(got.t_s, got.end_s))
    assert lengths.tolist() == pytest.approx([s for _, s in want])
    assert got.loop and got.t_s[0] == 0.0


def test_without_holds_the_replay_is_the_scaled_record_from_its_offset():
    rec = _record(12)
    got = replay(rec, rank=2, scale=1.0, holds=False)
    assert got.mbps.tolist() == [5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 1.0, 2.0, 3.0, 4.0]
    # one pass delivers the record's bits, less the two steps the testbed never played
    assert got.total_mbit == pytest.approx(rec.total_mbit - 0.5 * (11 + 12))


def test_holds_are_half_the_steps_and_10_to_90_whole_seconds():
    rec = traces.Trace(np.arange(4000) * 0.5, np.full(4000, 8.0), 2000.0)
    got = replay(rec, rank=1)
    extra = np.diff(np.append(got.t_s, got.end_s)) - 0.5
    held = extra[extra > 1e-9]
    assert abs(held.size / extra.size - 0.5) < 0.03          # binomial sd 0.008
    assert held.min() >= 10 and held.max() <= 90
    assert np.allclose(held, np.round(held))
    assert np.all(got.mbps == pytest.approx(8.0 * 0.7))
    share = traces.stats(got)['hold_time_share_10s']
    assert share > 0.95            # the artifact's logs: 98% of the time in holds


def test_duration_continues_the_draws_over_further_passes():
    rec = _record(10)
    one = replay(rec, rank=0)
    long = replay(rec, rank=0, duration_s=3 * one.duration_s)
    assert long.duration_s >= 3 * one.duration_s
    assert len(long) % 8 == 0 and len(long) >= 2 * 8         # whole passes, more than one
    assert np.array_equal(long.t_s[:8], one.t_s)             # the first pass is the pass
    passes = np.diff(np.append(long.t_s, long.end_s)).reshape(-1, 8)
    assert not all(np.array_equal(passes[0], p) for p in passes[1:])


def test_seed_gives_another_sample_of_the_same_procedure():
    rec = _record(40)
    a, b = replay(rec, rank=1), replay(rec, rank=1, seed=99)
    assert np.array_equal(a.mbps, b.mbps)                    # same offset, same steps
    assert not np.array_equal(a.t_s, b.t_s)                  # other holds


@pytest.mark.parametrize('kwargs, error', [
    ({'rank': -1}, ValueError), ({'scale': 0.0}, ValueError),
    ({'scale': float('nan')}, ValueError), ({'hold_range_s': (0, 5)}, ValueError),
    ({'hold_range_s': (9, 5)}, ValueError), ({'duration_s': 0.0}, ValueError),
])
def test_bad_arguments_are_refused(kwargs, error):
    with pytest.raises(error):
        replay(_record(), **kwargs)


@pytest.mark.parametrize('holds', [False, True])
def test_a_duration_beyond_the_step_budget_is_refused_before_it_fills_memory(holds,
                                                                             monkeypatch):
    monkeypatch.setattr(replay_module, 'MAX_REPLAY_STEPS', 1000)
    rec = _record(10)
    with pytest.raises(ValueError, match='more than 1000 segments'):
        replay(rec, holds=holds, duration_s=1e9)
    assert len(replay(rec, holds=holds, duration_s=100 * rec.duration_s)) <= 1000


def test_a_record_too_short_to_replay_is_refused():
    with pytest.raises(traces.TraceFormatError, match='at least 3 steps'):
        replay(_record(2))


def _run(argv):
    parser = argparse.ArgumentParser(prog='rog')
    cli_trace.add_parser(parser.add_subparsers(dest='command', required=True))
    args = parser.parse_args(['trace'] + argv)
    out = io.StringIO()
    return cli_trace.run(args, out=out), out.getvalue()


def test_cli_writes_what_replay_returns(tmp_path):
    rec_path, out_path = tmp_path / 'record.txt', tmp_path / 'replayed.csv'
    rec_path.write_text(''.join(f'{0.5 * k:.1f} {k + 1}.0\n' for k in range(30)))
    code, text = _run(['replay', str(rec_path), '--rank', '4', '--out', str(out_path)])
    assert code == 0 and 'rank 4' in text and 'holds' in text
    back = traces.load_trace(out_path)
    want = replay(traces.load_trace(rec_path), rank=4)
    assert np.array_equal(back.t_s, want.t_s) and np.array_equal(back.mbps, want.mbps)
    assert back.end_s == want.end_s


def test_cli_bad_input_writes_nothing(tmp_path, capsys):
    out_path = tmp_path / 'replayed.csv'
    code, _ = _run(['replay', str(tmp_path / 'missing.txt'), '--out', str(out_path)])
    assert code == 2 and 'no such file' in capsys.readouterr().err
    bad = tmp_path / 'bad.txt'
    bad.write_text('0 1\n0.5 2\nzero three\n')
    code, _ = _run(['replay', str(bad), '--out', str(out_path)])
    assert code == 2 and 'bad.txt:3' in capsys.readouterr().err
    good = tmp_path / 'good.txt'
    good.write_text('0 1\n0.5 2\n1.0 3\n1.5 4\n')
    code, _ = _run(['replay', str(good), '--scale', '-1', '--out', str(out_path)])
    assert code == 2 and 'scale' in capsys.readouterr().err
    assert not out_path.exists()
