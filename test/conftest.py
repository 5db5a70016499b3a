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
"""Shared pytest set-up: deterministic torch, small thread pool, groups for pytest-xdist."""

import fnmatch

import pytest
import torch

torch.set_num_threads(1)   # small tensors: one thread is faster and stable under load
torch.manual_seed(0)


# Modules whose tests run protocol and training code in virtual time, in this process only
# (no nodes, no DDS, no wall-clock bounds). With pytest-xdist (`pytest -n auto`, README's test
# command) they spread over every core; every other test is in one group, so tests that start
# processes, talk DDS or measure wall-clock time never run two at once, whatever the core count.
VIRTUAL_TIME_MODULES = ('test_protocol_*', 'test_core_*', 'test_policy_*', 'test_workloads_*',
                        'test_sim_*', 'test_report_*', 'test_async_when_out',
                        'test_outage_rsp', 'test_free_stragglers', 'test_straggler_slack',
                        'test_membership_timeline', 'test_aet', 'test_adacomp', 'test_gsp')
WALL_CLOCK_GROUP = 'wall_clock'


def pytest_collection_modifyitems(config, items):
    """Put every test outside VIRTUAL_TIME_MODULES in one xdist group (`--dist loadgroup`)."""
    for item in items:
        module = item.path.stem if hasattr(item, 'path') else ''
        if not any(fnmatch.fnmatchcase(module, pattern) for pattern in VIRTUAL_TIME_MODULES):
            item.add_marker(pytest.mark.xdist_group(WALL_CLOCK_GROUP))
