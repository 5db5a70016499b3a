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
"""The test processes' DDS domain allocator (test/dds_domains.py): one domain per key."""

import fcntl
import glob
import os
import re
import sys
import types

import dds_domains
import pytest


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """Give the allocator an empty memory, lock folder and process id, as a new process has."""
    monkeypatch.setattr(dds_domains, '_GIVEN', {})
    monkeypatch.setattr(dds_domains, '_HELD', [])
    monkeypatch.setattr(dds_domains, 'LOCKS', str(tmp_path))
    monkeypatch.setattr(dds_domains.os, 'getpid', lambda: 4242)
    yield dds_domains
    for fd in dds_domains._HELD:
        os.close(fd)


def test_every_key_gets_its_own_domain_and_keeps_it(fresh):
    keys = [f'test_module_{m}:{offset}' for m in range(8) for offset in range(20)]
    first = [fresh.domain(key) for key in keys]
    assert len(set(first)) == len(keys)
    assert [fresh.domain(key) for key in keys] == first
    assert all(fresh.LOW <= d < fresh.LOW + fresh.SPAN for d in first)


def test_modules_whose_old_formulas_met_get_two_domains(fresh):
    # Before: test_wire_qos_mismatch (110 + (5 pid + offset) % 50) and test_wire_ros_graph
    # (110 + (7 pid + offset) % 50) drew the same domain in one worker for some process ids,
    # each under its own configuration: 'domain 138 already configured differently'
    assert fresh.domain('test_wire_qos_mismatch:0') != fresh.domain('test_wire_ros_graph:0')


def test_a_domain_a_bus_configured_otherwise_is_never_handed_out(fresh, monkeypatch):
    start = fresh.LOW + (4242 * 37) % fresh.SPAN
    bus = types.SimpleNamespace(_DOMAINS={start: None, start + 1: None})
    monkeypatch.setitem(sys.modules, 'rog_ros.transport.dds_bus', bus)
    assert fresh.domain('a') == start + 2
    assert fresh.domain('b') == start + 3


def test_every_domain_handed_out_is_an_error_not_a_repeat(fresh, monkeypatch):
    monkeypatch.setattr(fresh, 'SPAN', 3)
    assert len({fresh.domain(k) for k in 'abc'}) == 3
    with pytest.raises(RuntimeError, match='no DDS domain left'):
        fresh.domain('d')


def test_a_domain_another_process_holds_is_skipped(fresh, tmp_path):
    # (a lock taken through another open file stands for another process: flock locks
    # belong to open files, not to processes)
    start = fresh.LOW + (4242 * 37) % fresh.SPAN
    other = os.open(str(tmp_path / f'{start}.lock'), os.O_RDWR | os.O_CREAT)
    fcntl.flock(other, fcntl.LOCK_EX)
    try:
        assert fresh.domain('a') == start + 1
    finally:
        os.close(other)
    assert fresh.domain('b') == start         # free again once its holder let go
    assert sorted(os.listdir(tmp_path)) == [f'{start}.lock', f'{start + 1}.lock']


def test_no_module_draws_a_domain_from_the_process_id_inside_the_span():
    # Before: test_py38_compat's child drew 200 + pid % 9 (test_transport_rediscovery's tool
    # 10 + (7 pid + k) % 200), inside LOW .. LOW + SPAN - 1 and under no lock, so another
    # test process's allocator could hand the same domain to its buses meanwhile (the
    # cross-process sharing the locks exist to prevent). Only the
    # discovery-range module's children keep a formula of their own, in 210..231.
    here = os.path.dirname(os.path.abspath(__file__))
    drawn = []
    for path in sorted(glob.glob(os.path.join(here, 'test_*.py'))):
        if os.path.basename(path) == 'test_transport_discovery_range.py':
            continue
        with open(path) as fh:
            drawn += [f'{os.path.basename(path)}:{no}' for no, line in enumerate(fh, 1)
                      if re.search(r'domain\w*\s*=.*getpid\(\)|getpid\(\).*%', line)]
    assert drawn == []
    assert dds_domains.LOW + dds_domains.SPAN <= 210
