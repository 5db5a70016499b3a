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
Kernel link emulation (``--netns``): namespaces, veth pairs and tbf that follow a trace.

The shaping tests create their own namespaces (unique random prefix), never touch the host's
interfaces and delete everything afterwards. They need root and iproute2 (``ip``, ``tc``;
Debian: ``apt-get install iproute2``) and skip, saying which is missing, otherwise.
"""

import subprocess

import numpy as np
import pytest

from rog_ros.net import netns
from rog_ros.net.traces import Trace

REASON = netns.unavailable_reason()
needs_root = pytest.mark.skipif(REASON is not None, reason=f'--netns {REASON}')


def _ip(*args) -> str:
    return subprocess.run(['ip', *args], capture_output=True, text=True, check=True).stdout


def test_names_fit_linux_limits_and_are_unique():
    a, b = netns.NetnsFleet(12), netns.NetnsFleet(12)
    names = [x for link in a.links for x in (link.server_if, link.worker_if, link.worker_ns)]
    assert max(len(n) for n in names) <= 15
    assert len(set(names)) == len(names)
    assert a.prefix != b.prefix
    with pytest.raises(ValueError):
        netns.NetnsFleet(0)
    with pytest.raises(ValueError):
        netns.NetnsFleet(2, prefix='bad-prefix!')


def test_cyclone_config_keeps_datagrams_below_the_mtu():
    xml = netns.cyclone_xml(['10.231.0.2'], ['10.231.0.1'], mtu=1500)
    assert '<NetworkInterface address="10.231.0.2"' in xml
    assert '<Peer address="10.231.0.1"/>' in xml
    assert '<MaxMessageSize>1472B</MaxMessageSize>' in xml
    assert '<AllowMulticast>false</AllowMulticast>' in xml


@needs_root
def test_namespaces_are_created_inside_and_deleted_afterwards():
    host_links_before = _ip('-o', 'link', 'show')
    with netns.NetnsFleet(2) as fleet:
        listed = _ip('netns', 'list')
        assert fleet.server_ns in listed and fleet.worker_ns(1) in listed
        # the veth ends live only inside the namespaces
        assert fleet.links[0].server_if in _ip('-n', fleet.server_ns, '-o', 'link')
        assert fleet.links[0].worker_if not in _ip('-o', 'link', 'show')
        fleet.set_rate(1, 12.5)
        qdisc = subprocess.run(['tc', '-n', fleet.worker_ns(1), 'qdisc', 'show', 'dev',
                                fleet.links[1].worker_if], capture_output=True, text=True,
                               check=True).stdout
        assert 'tbf' in qdisc and '12500Kbit' in qdisc.replace('12.5Mbit', '12500Kbit')
        assert fleet.rates[(1, 'up')] == fleet.rates[(1, 'down')] == 12.5
    listed = _ip('netns', 'list')
    assert fleet.server_ns not in listed and fleet.worker_ns(1) not in listed
    assert _ip('-o', 'link', 'show').count('\n') == host_links_before.count('\n')


@needs_root
def test_dds_goodput_follows_the_trace_within_ten_percent():
    # Prepare: 30 Mbit/s for 2 s, then 12 Mbit/s for 2 s, looping
    from rog_ros.experiments.bench_transport import bench_netns
    trace = Trace(np.array([0.0, 2.0]), np.array([30.0, 12.0]), 4.0)
    # Execute: RowChunks over DDS between two processes in two namespaces
    res = bench_netns(trace=trace, duration_s=5.0)
    # Assert: goodput / trace rate over the same window
    assert res['netns_complete']
    assert res['netns_rate_updates'] >= 2                      # the follower changed the rate
    assert 12.0 < res['netns_configured_mbps'] < 30.0
    assert 0.9 <= res['netns_goodput_fraction'] <= 1.1, res


def test_goodput_is_timed_from_the_sends_not_from_a_drained_backlog():
    # a subscriber that fell behind read 60 chunks of 1 MB, sent over 1 s, in 5 ms: timed on
    # arrivals alone that was 9,415 MB/s
    from rog_ros.experiments.bench_transport import goodput_bps
    sent = np.linspace(0.0, 1.0, 61)
    arrivals = np.linspace(1.0, 1.005, 61)
    sizes = np.full(61, 1e6)
    bps, t0, t1 = goodput_bps(arrivals, sizes, arrivals - sent, warmup_s=0.0)
    assert bps / 8e6 == pytest.approx(61 / 1.005, rel=1e-9)
    assert (t0, t1) == (0.0, 1.005)
    warm, t0, _ = goodput_bps(arrivals, sizes, arrivals - sent, warmup_s=0.5)
    assert t0 == pytest.approx(0.5) and warm / 8e6 == pytest.approx(31 / 0.505)
    # arrivals only (no latencies): the old reading, kept for callers without send times
    assert goodput_bps(sent, sizes, warmup_s=0.0)[0] / 8e6 == pytest.approx(61.0)


@needs_root
def test_a_pair_with_multicast_and_its_worker_end_set_down_and_up():
    """
    ``multicast=True`` turns multicast on at both ends; ``set_link`` takes the worker's end down.

    The rediscovery measurement (``--outage link``) made its own pair with these two steps, a
    copy of this class; it now runs on it: a Wi-Fi MTU, multicast for the shipped ``wifi``.
    """
    with netns.NetnsFleet(1, mtu=1500, multicast=True) as fleet:
        link = fleet.links[0]
        for ns, dev in ((fleet.server_ns, link.server_if), (link.worker_ns, link.worker_if)):
            shown = _ip('-n', ns, '-o', 'link', 'show', 'dev', dev)
            assert 'MULTICAST' in shown and 'mtu 1500' in shown and ',UP' in shown
        fleet.set_link(0, up=False)
        assert ',UP' not in _ip('-n', link.worker_ns, '-o', 'link', 'show', 'dev', link.worker_if)
        fleet.set_link(0, up=True)
        assert ',UP' in _ip('-n', link.worker_ns, '-o', 'link', 'show', 'dev', link.worker_if)
