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
A DdsBus writer ends as an rmw_cyclonedds writer does: without disposing its instance.

rmw_cyclonedds_cpp creates every writer with ``dds_qset_writer_data_lifecycle(qos, false)``,
so a ROS 2 subscriber of a node that exits sees NOT_ALIVE_NO_WRITERS; a writer that disposes
(Cyclone's default) leaves it NOT_ALIVE_DISPOSED instead, which tools treat as the data being
withdrawn. The reader here is a plain participant of this process; the bus is the one under
test.
"""

import os
import time

import dds_domains
import pytest

from rog_ros.protocol import messages as m

pytest.importorskip('cyclonedds')
dds_bus = pytest.importorskip('rog_ros.transport.dds_bus')
cyclone_config = pytest.importorskip('rog_ros.transport.cyclone_config')

WAIT_S = 10.0
TOPIC = 'w0/schedule'          # reliable: the end of the writer reaches the reader for sure


def _domain(offset: int) -> int:
    """Return this module's domain ``offset`` (:func:`dds_domains.domain`)."""
    return dds_domains.domain(f'{__name__}:{offset}')


def _bus(offset: int):
    """Open a DdsBus on the loopback configuration and this module's domain ``offset``."""
    return dds_bus.DdsBus(namespace=f'/rog_life_{os.getpid()}_{offset}',
                          domain_id=_domain(offset),
                          config=str(cyclone_config.config_path('loopback')))


def test_every_writer_of_the_bus_has_autodispose_off():
    from cyclonedds.qos import Policy

    bus = _bus(0)
    try:
        bus.advertise(TOPIC)
        bus.advertise('status/rog_worker_0/train_status')
        for topic, writer in bus._writers.items():
            assert writer.get_qos()[Policy.WriterDataLifecycle] == \
                Policy.WriterDataLifecycle(autodispose=False), topic
    finally:
        bus.close()


def test_a_reader_sees_no_writers_not_disposed_when_the_bus_closes():
    from cyclonedds.core import InstanceState
    from cyclonedds.domain import DomainParticipant
    from cyclonedds.qos import Policy, Qos
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic
    from cyclonedds.util import duration

    from rog_ros.transport import idl

    if dds_bus.ddspy_take is None:                  # pragma: no cover - other bindings
        pytest.skip('this binding has no raw take to read the instance state with')
    bus = _bus(1)
    participant = DomainParticipant(bus.domain_id)
    topic = Topic(participant, f'rt{bus.namespace}/{TOPIC}', idl.dds_type('Schedule'))
    reader = DataReader(participant, topic, qos=Qos(
        Policy.Reliability.Reliable(max_blocking_time=duration(seconds=1)),
        Policy.History.KeepLast(10), Policy.DataRepresentation(use_cdrv0_representation=True)))
    try:
        bus.advertise(TOPIC)
        deadline = time.monotonic() + WAIT_S
        while bus.matched(TOPIC) == 0:
            assert time.monotonic() < deadline, 'the bus never matched the reader'
            time.sleep(0.02)
        bus.publish(TOPIC, m.Schedule(worker=0, clock=1, push_deadline_s=0.5))
        assert _states(reader, deadline) == [InstanceState.Alive], 'the sample never arrived'
        # Execute
        bus.close()
        states = _states(reader, deadline)
        # Assert
        assert states == [InstanceState.NotAliveNoWriters], states
        assert InstanceState.NotAliveDisposed not in states, states
    finally:
        bus.close()
        for entity in (reader, topic, participant):
            entity.__del__()


def _states(reader, deadline: float) -> list:
    """Wait for samples (valid or not) in ``reader``; return their instance states."""
    while time.monotonic() < deadline:
        got = [info.instance_state for _, info in dds_bus._raw_take(reader._ref)]
        if got:
            return got
        time.sleep(0.02)
    return []
