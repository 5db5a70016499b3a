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
"""
``rog doctor`` reads the ROS 2 graph: node names used twice, the other GID layout, a failed read.

The samples are the ones DdsBus publishes on ``ros_discovery_info`` (both layouts, as
``$ROS_DISTRO`` picks them), read back by the doctor's parser and by its reader on a DDS
domain of this module's own; the child's failures are simulated at ``subprocess.run``.
"""

import subprocess

import dds_domains
import pytest
from rog_ros.nodes import doctor, doctor_graph

GUID = bytes(range(1, 17))


def _domain(offset: int) -> int:
    """Return this module's domain ``offset`` (:func:`dds_domains.domain`)."""
    return dds_domains.domain(f'{__name__}:{offset}')


def _sample(size: int, nodes, gids: int = 2) -> bytes:
    """Return a serialised ParticipantEntitiesInfo of ``size``-byte GIDs naming ``nodes``."""
    discovery_info = pytest.importorskip('rog_ros.transport.discovery_info')
    info, node, gid = discovery_info.message_types(size)[:3]
    g = gid(data=list(GUID.ljust(size, b'\0')))
    return bytes(info(gid=g, node_entities_info_seq=[
        node(node_namespace=ns, node_name=name, reader_gid_seq=[g] * gids,
             writer_gid_seq=[g] * (gids + 1)) for ns, name in nodes]).serialize())


@pytest.mark.parametrize('size', (16, 24))
@pytest.mark.parametrize('nodes', [[], [('/', 'a')], [('/rog', 'rog_server'), ('/r1', 'arm')]])
def test_a_sample_is_read_in_the_layout_it_was_written_in(size, nodes):
    assert doctor_graph.parse_entry(_sample(size, nodes)) == (size, GUID, nodes)


def test_bytes_of_no_layout_are_not_an_entry():
    data = _sample(16, [('/rog', 'rog_server')])
    assert doctor_graph.parse_entry(data[:-3]) is None          # cut short
    assert doctor_graph.parse_entry(data + b'\1' * 8) is None   # more than one entry
    assert doctor_graph.parse_entry(b'\0\1\0\0' + bytes(range(40))) is None


def test_node_names_used_twice_are_one_line():
    result = {'participants': {
        'p1': {'layout': 16, 'nodes': [['/rog', 'rog_server'], ['/rog', 'netmon']]},
        'p2': {'layout': 16, 'nodes': [['/rog', 'rog_server']]},
        'p3': {'layout': 16, 'nodes': [['/rog2', 'rog_server'], ['/rog', 'netmon']]}}}
    found = doctor_graph.graph_findings(result, 7, 16, '')
    assert len(found) == 1 and found[0].level == 'warn'
    assert 'domain 7: node names used more than once: /rog/netmon (2x), /rog/rog_server ' \
        '(2x);' in found[0].detail and 'namespace:=' in found[0].fix


@pytest.mark.parametrize('here, distro, theirs, fix', [
    (16, '', 24, 'ROS_DISTRO=humble'),
    (24, 'humble', 16, 'unset ROS_DISTRO'),
])
def test_peers_of_the_other_gid_layout_are_one_line_naming_the_ros_distro(
        here, distro, theirs, fix):
    result = {'participants': {
        'p1': {'layout': theirs, 'nodes': [['/', 'talker']]},
        'p2': {'layout': theirs, 'nodes': None},             # seen by its writer only
        'p3': {'layout': here, 'nodes': [['/rog', 'rog_server']]}}}
    found = doctor_graph.graph_findings(result, 0, here, distro)
    assert len(found) == 1 and found[0].level == 'warn'
    assert f'2 participant(s) (/talker) publish {theirs}-byte GIDs' in found[0].detail
    assert fix in found[0].fix


def test_a_graph_without_problems_is_one_ok_line():
    found = doctor_graph.graph_findings({'participants': {}}, 3, 16, '')
    assert [(f.level, f.detail) for f in found] == [
        ('ok', 'domain 3: no other ROS 2 participant seen in 3 s')]


def test_the_reader_sees_both_layouts_and_a_name_twice(monkeypatch):
    # Prepare: on one domain, /dup/rog_fleet twice (16-byte GIDs) and a Humble-style node
    dds_bus = pytest.importorskip('rog_ros.transport.dds_bus')
    from rog_ros.transport.cyclone_config import config_path

    config, domain = str(config_path('loopback')), _domain(0)
    monkeypatch.setenv('ROS_DISTRO', 'humble')
    humble = dds_bus.DdsBus(namespace='/old', domain_id=domain, config=config,
                            node_name='talker')
    monkeypatch.delenv('ROS_DISTRO')
    twins = [dds_bus.DdsBus(namespace='/dup', domain_id=domain, config=config,
                            node_name='rog_fleet') for _ in range(2)]
    twins[1].subscribe('w0/chunks')
    try:
        # Execute
        result = doctor_graph.read_graph(domain, 2.0)
        found = doctor_graph.graph_findings(result, domain, 16, '')
    finally:
        for bus in twins + [humble]:
            bus.close()
    # Assert
    assert sorted((p['layout'], p['nodes']) for p in result['participants'].values()) == [
        (16, [['/dup', 'rog_fleet']]), (16, [['/dup', 'rog_fleet']]), (24, [['/old', 'talker']])]
    assert [f.detail.split(': ')[1] for f in found] == [
        'node names used more than once', '1 participant(s) (/old/talker) publish 24-byte '
        'GIDs (ROS 2 Humble or older), the nodes here 16 (ROS_DISTRO unset)']


def test_rog_doctor_runs_the_graph_check_in_a_child(monkeypatch):
    # Prepare: a Humble-layout node on the domain the doctor reads, as a user's shell sets it
    dds_bus = pytest.importorskip('rog_ros.transport.dds_bus')
    from rog_ros.transport.cyclone_config import config_path, file_uri

    assert doctor_graph.check_graph in doctor.CHECKS
    config, domain = str(config_path('loopback')), _domain(1)
    monkeypatch.setenv('ROS_DISTRO', 'humble')
    humble = dds_bus.DdsBus(namespace='/old', domain_id=domain, config=config,
                            node_name='talker')
    monkeypatch.delenv('ROS_DISTRO')
    monkeypatch.setenv('ROS_DOMAIN_ID', str(domain))
    monkeypatch.setenv('CYCLONEDDS_URI', file_uri(config))
    try:
        # Execute
        found = doctor_graph.check_graph()
    finally:
        humble.close()
    # Assert
    assert len(found) == 1 and found[0].level == 'warn', found
    assert '(/old/talker) publish 24-byte GIDs' in found[0].detail
    assert found[0].fix.endswith('ROS_DISTRO=humble')


@pytest.mark.parametrize('outcome, said', [
    (subprocess.CompletedProcess([], -6, '', 'dds_create_participant: Aborted\n'),
     'the reader ended with status -6: dds_create_participant: Aborted'),
    (subprocess.TimeoutExpired([], 30), 'the reader hung for 30 s'),
])
def test_a_failing_reader_is_one_line(monkeypatch, outcome, said):
    pytest.importorskip('cyclonedds')
    monkeypatch.setenv('ROS_DOMAIN_ID', '5')
    monkeypatch.delenv('CYCLONEDDS_URI', raising=False)

    def run(*args, **kwargs):
        """Stand for the child: end as ``outcome`` says."""
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    monkeypatch.setattr(doctor_graph.subprocess, 'run', run)
    found = doctor_graph.check_graph()
    assert [(f.level, f.detail) for f in found] == [
        ('warn', f'domain 5: cannot read ros_discovery_info ({said}); node names and GID '
                 'layouts not checked')]
