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
"""Shutdown signals: one request however often it is sent at once; later, the user insists."""

import signal

import pytest
from rog_ros.nodes.signals import INSIST_AFTER_S, SignalRequests


class Clock:
    """A clock the test moves."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_signals_that_arrive_together_are_one_shutdown():
    # rog fleet killed with SIGKILL: its children got SIGTERM once per ending thread, and
    # the second one made each node leave without writing its summary and model
    clock = Clock()
    req = SignalRequests(clock)
    for _ in range(3):
        req._handle(signal.SIGTERM, None)
        clock.now += 0.01
    assert req.shutdown_requested and req.take() == ['shutdown']


def test_a_shutdown_signal_later_insists():
    clock = Clock()
    req = SignalRequests(clock)
    req._handle(signal.SIGINT, None)
    clock.now += INSIST_AFTER_S
    with pytest.raises(KeyboardInterrupt):
        req._handle(signal.SIGINT, None)


def test_a_signal_after_a_requested_shutdown_is_taken_as_one_more_request():
    req = SignalRequests(Clock())
    req.request('shutdown')                     # a ROS 2 lifecycle service, say
    req._handle(signal.SIGTERM, None)
    req._handle(signal.SIGUSR1, None)
    assert req.take() == ['shutdown', 'shutdown', 'deactivate']


def test_a_stopped_fleet_exits_with_the_first_signals_status():
    # rog fleet exited 130 for a SIGTERM too (the README promises 143)
    from rog_ros.nodes.stop_requests import StopRequests
    term, ctrl_c = StopRequests(), StopRequests()
    term._handle(signal.SIGTERM, None)
    term._handle(signal.SIGINT, None)
    ctrl_c._handle(signal.SIGINT, None)
    assert (term.exit_status(), ctrl_c.exit_status(), term.count) == (143, 130, 2)
