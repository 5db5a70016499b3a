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
"""Real fleets default to a longer rog deadline floor than the simulator, and it is checked."""

import pytest
from rog_ros.nodes import rog_worker
from rog_ros.nodes.assembly import build_training
from rog_ros.nodes.params import check_fleet_args, DEFAULT_DEADLINE_FLOOR
from rog_ros.protocol.policies import make_policy


def test_nodes_default_to_the_fleet_floor_and_pass_it_to_the_policy():
    parser = rog_worker.build_parser()
    args = parser.parse_args(['--workload', 'toy', '--rank', '0'])
    assert args.deadline_floor == DEFAULT_DEADLINE_FLOOR == 3.0
    assert make_policy('rog:4').deadline_floor == 1.0          # the simulator's default
    assert build_training(args).policy.deadline_floor == 3.0
    args = parser.parse_args(['--workload', 'toy', '--rank', '0', '--deadline-floor', '1.5'])
    assert build_training(args).policy.deadline_floor == 1.5


@pytest.mark.parametrize('bad', ['-1', '11'])
def test_out_of_range_floor_is_a_usage_error(bad):
    parser = rog_worker.build_parser()
    args = parser.parse_args(['--workload', 'toy', '--rank', '0', '--deadline-floor', bad])
    with pytest.raises(SystemExit):
        check_fleet_args(parser, args)
