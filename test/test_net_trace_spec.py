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
"""``--trace`` lists (one link per robot) in the simulator, the nodes and the checks."""

import numpy as np
import pytest
from rog_ros import checks
from rog_ros.checks import ConfigError
from rog_ros.net import trace_spec, traces
from rog_ros.nodes.emulated_link import link_for, PRESET_DURATION_S
from rog_ros.sim.simulator import file_offsets, make_traces


def _record(path, mbps, seconds=100.0):
    """Write a two-step record (``mbps``, then twice it): every offset reads a known rate."""
    path.write_text(f't_seconds,mbps\n0,{mbps}\n{seconds / 2},{2 * mbps}\n'
                    f'# rog_ros trace: end_s={seconds}\n')
    return str(path)


def test_a_list_gives_robot_r_entry_r_mod_k():
    assert trace_spec.sources('indoors') == ['indoors']
    assert trace_spec.sources('a.csv, b.csv,outdoors') == ['a.csv', 'b.csv', 'outdoors']
    assert [trace_spec.source_for('a,b,c', r) for r in range(5)] == ['a', 'b', 'c', 'a', 'b']


def test_an_existing_file_with_a_comma_in_its_name_is_one_file(tmp_path):
    path = _record(tmp_path / 'wifi,run1.csv', 5.0)
    assert trace_spec.sources(path) == [path]
    assert checks.trace('--trace', path) == path


@pytest.mark.parametrize('spec', ['a.csv,,b.csv', 'a.csv,', ',a.csv'])
def test_an_empty_entry_is_refused_rather_than_shifting_the_robots(spec):
    with pytest.raises(ValueError, match='empty entry'):
        trace_spec.sources(spec)
    with pytest.raises(ConfigError, match='--trace: trace list .* empty entry'):
        checks.trace('--trace', spec)


def test_the_simulator_gives_each_robot_its_own_record(tmp_path):
    slow, fast = _record(tmp_path / 'slow.csv', 1.0), _record(tmp_path / 'fast.csv', 80.0)
    per_robot = make_traces(f'{slow},{fast}', 4, seed=3)
    offsets = file_offsets(100.0, 4, 3)
    for r, (trace, offset) in enumerate(per_robot):
        base = 1.0 if r % 2 == 0 else 80.0
        assert offset == offsets[r]           # the single-file rule, per robot
        rate = trace.rate_at(offset)
        assert rate == (base if offset % 100.0 < 50.0 else 2 * base)
    # one file: the same offsets as before lists existed, every robot on that file
    alone = make_traces(slow, 4, seed=3)
    assert [o for _, o in alone] == offsets
    assert {float(t.mbps.max()) for t, _ in alone} == {2.0}


def test_the_simulator_mixes_presets_and_files(tmp_path):
    fast = _record(tmp_path / 'fast.csv', 80.0)
    (t0, o0), (t1, o1), (t2, _) = make_traces(f'through_wall,{fast}', 3, seed=1, duration_s=60.0)
    ref = traces.generate('through_wall', duration_s=60.0, seed=1000, robot=0, fleet=3)
    np.testing.assert_array_equal(t0.mbps, ref.mbps)
    assert o0 == 0.0 and float(t1.mbps.max()) == 160.0
    ref2 = traces.generate('through_wall', duration_s=60.0, seed=1002, robot=2, fleet=3)
    np.testing.assert_array_equal(t2.mbps, ref2.mbps)


def test_an_unknown_entry_is_named(tmp_path):
    fast = _record(tmp_path / 'fast.csv', 80.0)
    with pytest.raises(ValueError, match="unknown trace 'nowhere.csv'"):
        make_traces(f'{fast},nowhere.csv', 2, seed=0)
    named = r"--trace entry 1 \(robot r follows entry r mod 2\): 'nowhere.csv' is neither"
    with pytest.raises(ConfigError, match=named):
        checks.trace('--trace', f'{fast},nowhere.csv')
    bad = tmp_path / 'bad.csv'
    bad.write_text('1,1\n0,2\n')          # a time that goes back (repeated times are merged)
    with pytest.raises(ConfigError, match=r'--trace entry 0 \(.*\): .*bad.csv:2: time 0.0'):
        checks.trace('--trace', f'{bad},{fast}')


def test_a_fleet_robot_follows_its_entry(tmp_path):
    slow, fast = _record(tmp_path / 'slow.csv', 1.0), _record(tmp_path / 'fast.csv', 80.0)
    spec = f'{slow},{fast}'
    links = [link_for(spec, r, 3, seed=0) for r in range(3)]
    assert [float(link.trace.mbps.max()) for link in links] == [2.0, 160.0, 2.0]
    assert [link.name for link in links] == [slow, fast, slow]
    assert [link.offset_s for link in links] == [0.0, 100.0 / 3, 200.0 / 3]


def test_a_fleet_takes_one_robot_out_at_a_time_as_the_simulator_does():
    """``outages`` gives robot r of N the slots r, r + N, ... (it gave every robot every slot)."""
    for rank in range(3):
        link = link_for('outages', rank, 3, seed=2)
        ref = traces.generate('outages', PRESET_DURATION_S, seed=2000 + rank, robot=rank,
                              fleet=3)
        np.testing.assert_array_equal(link.trace.mbps, ref.mbps)
        np.testing.assert_array_equal(link.trace.t_s, ref.t_s)


def test_a_preset_name_wins_over_a_file_of_that_name_in_the_simulator_and_the_nodes(
        tmp_path, monkeypatch):
    """``indoors`` in a directory holding a file ``indoors`` is the preset on both sides."""
    monkeypatch.chdir(tmp_path)
    _record(tmp_path / 'indoors', 7.0)
    (sim, _), = make_traces('indoors', 1, seed=0, duration_s=PRESET_DURATION_S)
    fleet = link_for('indoors', 0, 1, seed=0)
    ref = traces.generate('indoors', PRESET_DURATION_S, seed=0)
    np.testing.assert_array_equal(sim.mbps, ref.mbps)
    np.testing.assert_array_equal(fleet.trace.mbps, ref.mbps)
    assert checks.trace('--trace', 'indoors') == 'indoors'


@pytest.mark.parametrize('entry, robot', [('run.mcap# robot = x', 'x'),
                                          ('run.mcap#robot =emulated', 'emulated'),
                                          ('run.mcap# netmon_0 #emulated', 'netmon_0'),
                                          ('run.mcap#robot= 2', '2')])
def test_spaces_around_a_tag_and_its_robot_equals_are_no_part_of_it(entry, robot):
    # 'run.mcap# robot = x' was read as a robot named 'robot = x', never in any bag
    assert trace_spec.parse(entry).robot == robot


@pytest.mark.parametrize('entry', ['run.mcap#net mon_0', 'run.mcap#robot=net mon',
                                   'run.mcap#netmon_0#emu lated'])
def test_a_tag_with_a_space_inside_is_refused_in_one_line_naming_the_forms(entry):
    with pytest.raises(ValueError) as err:
        trace_spec.parse(entry)
    message = str(err.value)
    assert '\n' not in message and 'holds a space' in message
    assert 'BAG#robot=ROBOT' in message and 'throughput, emulated, bitrate' in message
    with pytest.raises(ConfigError, match='holds a space'):
        checks.trace('--trace', entry)


def test_spaces_around_one_entry_are_no_part_of_it_as_in_a_list(tmp_path):
    # ' indoors' (a YAML value's newline, a quoted argument) was an unknown trace where
    # 'indoors, outdoors' and ' run.mcap#netmon_0' had their spaces stripped
    assert trace_spec.sources(' indoors\n') == ['indoors']
    assert trace_spec.parse(' link.csv ') == trace_spec.Entry('link.csv')
    path = _record(tmp_path / 'link.csv', 5.0)
    assert checks.trace('--trace', f' {path} ') == f' {path} '
    (trace, offset), = make_traces(f'{path}\n', 1, seed=0)
    assert float(trace.mbps.max()) == 10.0
    assert link_for(f' {path}', 0, 1).name == path
    np.testing.assert_array_equal(link_for('outages ', 1, 3, seed=2).trace.mbps,
                                  link_for('outages', 1, 3, seed=2).trace.mbps)
    spaced = _record(tmp_path / 'spaced.csv ', 7.0)        # (a file named so is itself)
    assert trace_spec.sources(spaced) == [spaced] and trace_spec.parse(spaced).source == spaced
