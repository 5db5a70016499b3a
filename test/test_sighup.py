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
"""SIGHUP (an SSH session that drops) stops a node or a fleet as SIGTERM does, cleanly."""

import os
from pathlib import Path
import select
import signal
import subprocess
import sys
import threading
import time

import pytest
from rog_ros.nodes.signals import (INSIST_AFTER_S, quiet_if_hung_up, SIGNAL_TRANSITIONS,
                                   SignalRequests)
from rog_ros.nodes.stop_requests import StopRequests

ROOT = Path(__file__).resolve().parent.parent


class Clock:
    """A clock the test moves."""

    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_sighup_asks_a_node_to_shut_down():
    # it ended the node on the spot (exit 129): its --record bag stayed 0 bytes
    clock = Clock()
    req = SignalRequests(clock)
    req._handle(signal.SIGHUP, None)
    assert SIGNAL_TRANSITIONS[signal.SIGHUP] == 'shutdown'
    assert req.shutdown_requested and req.take() == ['shutdown']
    clock.now += 10 * INSIST_AFTER_S
    req._handle(signal.SIGHUP, None)               # the kernel's, after the shell's: no insist
    assert req.take() == []
    with pytest.raises(KeyboardInterrupt):
        req._handle(signal.SIGTERM, None)          # the user insists


def test_sighup_stops_a_fleet_with_status_129():
    hup = StopRequests()
    hup._handle(signal.SIGHUP, None)
    assert (hup.count, hup.exit_status()) == (1, 129)
    before = signal.getsignal(signal.SIGHUP)
    stop = StopRequests().install()
    try:
        assert signal.getsignal(signal.SIGHUP) == stop._handle
        # to this thread: handled before pthread_kill returns (os.kill to the process and a
        # 0.05 s sleep raced under load: another thread could take it, handled later)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGHUP)
        assert (stop.count, stop.first_signal) == (1, signal.SIGHUP)
        stop.restore()
        # stopping: the shell's SIGHUP and then the kernel's must not cut the cleanup short
        assert signal.getsignal(signal.SIGHUP) == stop._handle
        signal.pthread_kill(threading.main_thread().ident, signal.SIGHUP)
        assert stop.count == 1                     # a hang-up does not insist
        stop._handle(signal.SIGINT, None)
        assert stop.count == 2                     # Ctrl-C does (the grace periods are cut)
    finally:
        signal.signal(signal.SIGHUP, before)
    untouched = StopRequests().install()
    untouched.restore()                            # no request: everything as it was
    assert signal.getsignal(signal.SIGHUP) == before


def test_under_nohup_sighup_stays_ignored():
    # nohup rog fleet ... &: the user asked it to outlive the session
    before = {sig: signal.getsignal(sig) for sig in SIGNAL_TRANSITIONS}
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        stop = StopRequests().install()
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) == stop._handle      # the others are ours
        stop.restore()
        req = SignalRequests().install()
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) == req._handle
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def test_a_hung_up_terminal_is_pointed_at_dev_null(tmp_path):
    master, slave = os.openpty()
    read_end, write_end = os.pipe()
    with open(tmp_path / 'log', 'w') as log, os.fdopen(slave, 'w') as tty, \
            os.fdopen(write_end, 'w') as pipe, os.fdopen(read_end) as reader:
        assert quiet_if_hung_up([tty, pipe, log]) == []      # all alive: left alone
        os.close(master)                                       # the SSH session drops
        assert quiet_if_hung_up([tty, pipe, log]) == [tty.fileno()]
        assert os.write(tty.fileno(), b'closing lines\n') == 14     # no EIO any more
        assert os.readlink(f'/proc/self/fd/{tty.fileno()}') == os.devnull
        pipe.write('still here\n')
        pipe.flush()
        assert reader.readline() == 'still here\n'


STOPPED_FLEET = """
import sys, time
from rog_ros.nodes.stop_requests import StopRequests
stop = StopRequests().install()
print('watching', flush=True)
while not stop.count:
    time.sleep(0.02)
print('interrupted; cleaning up', flush=True)      # EIO on a hung-up terminal
with open(sys.argv[1], 'w') as fh:
    fh.write(str(stop.exit_status()))
sys.exit(stop.exit_status())
"""


def _on_a_terminal(script: str, *args) -> tuple:
    """Start ``script`` in a session of its own whose terminal is a fresh pty; (proc, master)."""
    master, slave = os.openpty()
    take_tty = f'import os; os.close(os.open(os.ttyname(1), os.O_RDWR))\n{script}'
    proc = subprocess.Popen([sys.executable, '-c', take_tty, *args], stdin=slave,
                            stdout=slave, stderr=slave, start_new_session=True, cwd=ROOT)
    os.close(slave)
    return proc, master


def _read_until(fd: int, text: bytes, timeout_s: float = 20.0) -> bytes:
    """Read the pty ``fd`` until ``text`` came; return what was read."""
    got, deadline = b'', time.monotonic() + timeout_s
    while text not in got and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.1)[0]:
            got += os.read(fd, 4096)
    return got


def test_a_dropped_ssh_session_lets_the_fleet_clean_up(tmp_path):
    # the terminal's hang-up sends SIGHUP, and every later write to it fails with EIO: the
    # fleet must still stop, close its bag and delete its namespaces (here: write a file)
    done = tmp_path / 'cleaned'
    proc, master = _on_a_terminal(STOPPED_FLEET, str(done))
    try:
        assert b'watching' in _read_until(master, b'watching')
    finally:
        os.close(master)                                  # sshd closes the pty
    assert proc.wait(timeout=20) == 129
    assert done.read_text() == '129'


def test_netmon_stopped_by_sighup_closes_its_bag(tmp_path):
    reader = pytest.importorskip('mcap.reader')
    path = tmp_path / 'netmon.mcap'
    proc = subprocess.Popen([sys.executable, '-m', 'rog_ros.nodes.netmon', '--bus', 'dds',
                             '--namespace', f'/hup{os.getpid()}', '--record', str(path),
                             '--trace', 'indoors', '--workers', '2'],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None and (
                not path.exists() or path.stat().st_size == 0):
            time.sleep(0.1)       # the recorder's first flush: it has recorded something
        proc.send_signal(signal.SIGHUP)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    with open(path, 'rb') as fh:                   # closed: the summary is there
        bag = reader.make_reader(fh)
        topics = {c.topic for _, c, _ in bag.iter_messages()}
        assert bag.get_summary().statistics.message_count > 0
    assert f'/hup{os.getpid()}/status/netmon/link_stats' in topics


STOPPED_COMMAND = """
import os, signal, sys, time
from rog_ros import cli


def slow_cleanup(args):
    try:
        print('running', flush=True)     # in the try: the hang-up may come as it returns
        while True:
            time.sleep(0.02)
    finally:
        os.kill(os.getpid(), signal.SIGHUP)      # the kernel's hang-up after the shell's
        time.sleep(0.3)
        with open(sys.argv[1], 'w') as fh:
            fh.write('cleaned')


parser = cli.build_parser()
cli.build_parser = lambda: parser
args = parser.parse_args(['doctor'])
args.func = slow_cleanup
parser.parse_known_args = lambda argv=None: (args, [])
sys.exit(cli.main([]))
"""


def test_a_dropped_ssh_session_stops_a_rog_command_once_and_lets_it_clean_up(tmp_path):
    # Prepare: a rog command on a terminal (rog robot, rog compare: cleanup in a finally)
    done = tmp_path / 'cleaned'
    proc, master = _on_a_terminal(STOPPED_COMMAND, str(done))
    try:
        assert b'running' in _read_until(master, b'running')
    finally:
        os.close(master)                                  # sshd closes the pty
    # Assert: the status of a hang-up (not 1 from EIO on the closing line), cleanup whole
    assert proc.wait(timeout=20) == 129
    assert done.read_text() == 'cleaned'


def test_a_hang_up_is_ignored_before_the_handler_runs_any_other_python(monkeypatch):
    # CI: the handler imported before it ignored SIGHUP; the kernel's hang-up came during
    # that import, ran the handler again, and the cleanup was cut short (129, nothing written)
    from rog_ros import cli
    import builtins
    before = signal.getsignal(signal.SIGHUP)
    previous = cli._sigterm_as_interrupt()
    seen = []
    real_import = builtins.__import__

    def record_import(name, *args, **kwargs):
        """Record an import made inside the handler."""
        seen.append(('import', name))
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(cli, '_QUIET_IF_HUNG_UP',
                        [lambda: seen.append(('quiet', signal.getsignal(signal.SIGHUP)))])
    stopped = []
    builtins.__import__ = record_import
    try:
        cli._raise_terminated(signal.SIGHUP, None)
    except cli.Terminated as stop:
        stopped.append(stop.exit_status)
    finally:
        builtins.__import__ = real_import
        for sig, handler in previous.items():      # SIGTERM's too: as the test found them
            signal.signal(sig, handler)
        signal.signal(signal.SIGHUP, before)       # (the handler set it to ignored)
    assert stopped == [129]
    assert seen == [('quiet', signal.SIG_IGN)]     # no import; ignored before anything else
