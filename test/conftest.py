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
"""Shared pytest set-up: deterministic torch, one thread, the units pytest-xdist schedules."""

import fnmatch
import functools
from pathlib import Path
import re

import pytest
import torch

try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:            # plain `pytest` without the test extras: nothing to schedule
    LoadScopeScheduling = None

torch.set_num_threads(1)   # small tensors: one thread is faster and stable under load
torch.manual_seed(0)


# Modules whose tests run protocol and training code in virtual time, in this process only
# (no nodes, no DDS, no wall-clock bounds). With pytest-xdist (`pytest -n auto --dist
# loadgroup`, README's test command) their tests are units that any worker may take
# (`scheduling_unit`); every other test is in one unit, WALL_CLOCK_GROUP, so tests that start
# processes, talk DDS or measure wall-clock time never run two at once, whatever the cores.
VIRTUAL_TIME_MODULES = ('test_protocol_*', 'test_core_*', 'test_policy_*', 'test_workloads_*',
                        'test_sim_*', 'test_report_*', 'test_async_when_out',
                        'test_outage_rsp', 'test_free_stragglers', 'test_straggler_slack',
                        'test_membership_timeline', 'test_aet', 'test_adacomp', 'test_gsp')
# Modules that compute in this process only too, without virtual time (linters, parsers,
# codecs): scheduled like the virtual-time ones, so they leave the wall-clock unit shorter.
PROCESS_FREE_MODULES = ('test_lint', 'test_push_journal', 'test_net_record_gaps',
                        'test_fuzz_messages', 'test_dds_domains',
                        'test_graph_entry', 'test_net_duplex',
                        'test_net_estimator', 'test_net_links', 'test_net_mahimahi',
                        'test_net_replay', 'test_net_replay_log', 'test_net_columns',
                        'test_net_columns_bulk',
                        'test_msg_definitions', 'test_model_file', 'test_reject_notes',
                        'test_net_mobile_log', 'test_workload_options', 'test_signals',
                        'test_workload_self_check', 'test_wire_faults',
                        'test_security_robot_keys', 'test_cli_full_options',
                        'test_fleet_finished_state', 'test_net_field_records',
                        'test_net_bag_records', 'test_clocks',
                        'test_bus_node_names', 'test_chaos_clock_step',
                        'test_cli_bad_outputs', 'test_durable_writes',
                        'test_ros_graph_names', 'test_fleet_record_kept',
                        'test_diagnostics_names', 'test_push_transfers', 'test_push_durable',
                        'test_push_crash_sweep',
                        'test_push_fleet_restart', 'test_server_restart_end',
                        'test_push_wire_independent',
                        'test_membership_heard_valid', 'test_chaos_push',
                        'test_chaos_freeze', 'test_sim_push_charging')
WALL_CLOCK_GROUP = 'wall_clock'
# what makes a module share work between its tests: a wider fixture scope, a cached helper
SHARED_SCOPE = re.compile(r'scope\s*=\s*["\x27](class|module|package|session)["\x27]'
                          r'|lru_cache')


def scheduling_unit(nodeid: str, root: Path = Path('.')) -> str:
    """
    Name the unit of tests that one xdist worker runs together, in order.

    Every test that starts processes, talks DDS or bounds wall-clock time is in
    WALL_CLOCK_GROUP. Of the others, a module with a fixture shared beyond one test (a
    two-minute simulation in test_sim_regime) is one unit, so the fixture is built once, not
    once per worker; any other test is a unit of its own, so the long modules
    (test_async_when_out: 15 tests, 6 minutes) spread over the workers. ``root`` is the
    directory the node ids are relative to.
    """
    path = nodeid.split('::', 1)[0]
    module = path.rsplit('/', 1)[-1]
    module = module[:-3] if module.endswith('.py') else module
    if not any(fnmatch.fnmatchcase(module, pattern)
               for pattern in VIRTUAL_TIME_MODULES + PROCESS_FREE_MODULES):
        return WALL_CLOCK_GROUP
    return path if _shares_a_fixture(root / path) else nodeid


@functools.lru_cache(maxsize=None)
def _shares_a_fixture(module_file: Path) -> bool:
    try:
        return SHARED_SCOPE.search(module_file.read_text()) is not None
    except OSError:
        return True                # unreadable: keep its tests together, as is always safe


if LoadScopeScheduling is not None:
    class UnitScheduling(LoadScopeScheduling):
        """
        xdist's scope scheduler with `scheduling_unit` as the scope.

        Why not the `xdist_group` mark: pytest-xdist 3.8 groups by a suffix it writes into
        ``item._nodeid``, which pytest 9 no longer reads, so the marks were silently ignored
        and the wall-clock tests ran two at a time (and every module fixture twice). The
        scheduler hook is part of xdist's API and does not depend on pytest's node internals.
        """

        def _split_scope(self, nodeid: str) -> str:
            return scheduling_unit(nodeid, self.config.rootpath)

    @pytest.hookimpl(optionalhook=True)      # `pytest -p no:xdist`: no such hook, no error
    def pytest_xdist_make_scheduler(config, log):
        """Schedule by `scheduling_unit` for README's `--dist loadgroup`; else xdist's own."""
        if config.getvalue('dist') == 'loadgroup':
            return UnitScheduling(config, log)
        return None
