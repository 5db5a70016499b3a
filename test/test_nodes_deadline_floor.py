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
"""Fleets and the simulator share one rog deadline floor default, and it is checked."""

import pytest
from rog_ros.nodes import rog_worker
from rog_ros.nodes.assembly import build_training
from rog_ros.nodes.params import DEFAULT_DEADLINE_FLOOR
from rog_ros.protocol.policies import make_policy
from rog_ros.protocol.policies.base import DEFAULT_RTT_FLOOR


def test_nodes_default_to_the_policy_floors_and_pass_them_to_the_policy():
    parser = rog_worker.build_parser()
    args = parser.parse_args(['--workload', 'toy', '--rank', '0'])
    assert args.deadline_floor == DEFAULT_DEADLINE_FLOOR == 0.0
    assert args.rtt_floor == DEFAULT_RTT_FLOOR == 2.0
    sim = make_policy('rog:4')                                   # the simulator's defaults
    assert (sim.deadline_floor, sim.rtt_floor) == (0.0, 2.0)
    pol = build_training(args).policy
    assert (pol.deadline_floor, pol.rtt_floor) == (0.0, 2.0)
    args = parser.parse_args(['--workload', 'toy', '--rank', '0', '--deadline-floor', '1.5',
                              '--rtt-floor', '6'])
    pol = build_training(args).policy
    assert (pol.deadline_floor, pol.rtt_floor) == (1.5, 6.0)


@pytest.mark.parametrize('flag,bad', [('--deadline-floor', '-1'), ('--deadline-floor', '11'),
                                      ('--rtt-floor', '-1'), ('--rtt-floor', '101')])
def test_out_of_range_floor_is_a_usage_error(flag, bad):
    parser = rog_worker.build_parser()
    with pytest.raises(SystemExit):      # the declared range is checked while parsing
        parser.parse_args(['--workload', 'toy', '--rank', '0', flag, bad])


def test_the_fleet_plan_passes_the_floor_to_every_training_node_and_checks_it():
    from rog_ros.nodes import plan as fleet
    specs = fleet.plan(overrides={'deadline_floor': 1.5})
    floors = {s.name: s.parameters.get('deadline_floor') for s in specs if s.role != 'netmon'}
    assert set(floors.values()) == {1.5} and len(floors) == 4       # server + 3 workers
    assert {s.parameters['deadline_floor'] for s in fleet.plan()
            if s.role != 'netmon'} == {DEFAULT_DEADLINE_FLOOR}
    with pytest.raises(ValueError, match='deadline_floor'):
        fleet.plan(overrides={'deadline_floor': 11.0})
    specs = fleet.plan(overrides={'rtt_floor': 5.0})
    assert {s.parameters.get('rtt_floor') for s in specs if s.role != 'netmon'} == {5.0}
    with pytest.raises(ValueError, match='rtt_floor'):
        fleet.plan(overrides={'rtt_floor': 101.0})


@pytest.mark.parametrize('field', ['eval_samples', 'final_eval_samples'])
def test_simulator_rejects_empty_evaluations(field):
    from rog_ros.sim.simulator import SimConfig
    assert SimConfig().final_eval_samples is None                   # the whole set
    with pytest.raises(ValueError, match=field):
        SimConfig(**{field: 0})
