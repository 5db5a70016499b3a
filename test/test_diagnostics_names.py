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
"""The node name each node's ``/diagnostics`` statuses start with: its own, as it runs."""

from types import SimpleNamespace

from rog_ros.nodes import diagnostics, netmon, rog_server, rog_worker


def _parsed(module, *ros_args: str):
    """Return ``module``'s node settings, started with ``--ros-args ros_args``."""
    return module.build_parser().parse_args(['--ros-args', *ros_args])


def _server(args):
    """Return a stand-in ServerNode with ``args``, two workers, one of them stalled."""
    engine = SimpleNamespace(policy=SimpleNamespace(staleness=4), clock=[3, 5],
                             stall_since={1: 0.0}, stall_time=[0.0, 1.0], triggers=[1, 1],
                             bytes_up=10, bytes_down=20)
    return SimpleNamespace(args=args, engine=engine, life=SimpleNamespace(state='active'),
                           last_metrics={}, reject_counts=lambda: {'invalid': 1})


def _worker(args):
    """Return a stand-in WorkerNode with ``args``, computing its iteration 5."""
    engine = SimpleNamespace(policy=SimpleNamespace(staleness=4), local_staleness=lambda: 1,
                             state='computing', clock=5, pulled_clock=4, bytes_up=1,
                             bytes_down=2)
    return SimpleNamespace(args=args, rank=args.rank, engine=engine, driver=None,
                           life=SimpleNamespace(training=True, state='active'),
                           compute_s=0.5, loss=0.25, outbox=SimpleNamespace(),
                           reject_counts=lambda: {})


def _netmon_status_names(monkeypatch, *argv: str) -> list:
    """Return the status names netmon's ``main(argv)`` builds its statuses under."""
    names, builds = [], []
    monkeypatch.setattr(netmon, 'link_statuses', lambda name, stats: names.append(name) or [])
    monkeypatch.setattr(netmon, 'DiagnosticsPublisher',
                        lambda bus, build, rate: builds.append(build) or SimpleNamespace(
                            maybe_publish=lambda: False))
    assert netmon.main(['--bus', 'none', '--duration', '0.01', '--interface', 'lo', *argv]) == 0
    for build in builds:
        build(0.0)
    return names


def test_statuses_start_with_the_nodes_default_names():
    # Execute
    server = diagnostics.server_statuses(_server(_parsed(rog_server)), 0.0)
    worker = diagnostics.worker_statuses(_worker(_parsed(rog_worker, '-p', 'rank:=2')), 0.0)
    # Assert
    assert [s.name for s in server] == ['rog_server: training', 'rog_server: rejects']
    assert [s.name for s in worker] == ['rog_worker_2: training', 'rog_worker_2: link',
                                        'rog_worker_2: rejects']


def test_statuses_of_every_node_start_with_its_name_after_renaming(monkeypatch):
    # Prepare: each node renamed at start (ros2 run ... --ros-args -r __node:=NAME)
    server_args = _parsed(rog_server, '-r', '__node:=arm_server')
    worker_args = _parsed(rog_worker, '-p', 'rank:=1', '-r', 'rog_worker_1:__node:=arm_w1')
    # Execute
    server = diagnostics.server_statuses(_server(server_args), 0.0)
    worker = diagnostics.worker_statuses(_worker(worker_args), 0.0)
    monitor = _netmon_status_names(monkeypatch, '--nodes', '1', '--ros-args', '-r',
                                   '__node:=arm_netmon')
    # Assert: as diagnostic_updater, node.get_name() (the name it runs under) + ': ' + task
    assert [s.name for s in server] == ['arm_server: training', 'arm_server: rejects']
    assert [s.name for s in worker] == ['arm_w1: training', 'arm_w1: link', 'arm_w1: rejects']
    assert monitor == ['arm_netmon']
    assert all(s.hardware_id == diagnostics.HOST for s in server + worker)


def test_status_prefix_falls_back_to_the_code_name_without_node_settings():
    assert diagnostics.status_prefix(SimpleNamespace(rank=3), 'rog_worker_3') == 'rog_worker_3'
    assert diagnostics.status_prefix(None, 'rog_server') == 'rog_server'
