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
One node per state file: a second node started on a state file another process holds stops.

Two workers of one rank on one ``--state-dir`` (two ``ros2 run rog_ros rog_worker``, a launch
file started twice) wrote their checkpoints over each other's. The hold is a flock the kernel
drops when its process ends: a node killed with SIGKILL does not block its restart.
"""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from rog_ros.checks import ConfigError
from rog_ros.nodes import durable, rog_server, rog_worker, server_node, state_dir, worker_node
from test_nodes_lifecycle import in_memory_fleet

HOLD = ('import sys, time\n'
        'from rog_ros.nodes.durable import hold\n'
        "hold(sys.argv[1], 'rog_worker 0')\n"
        "print('held', flush=True)\n"
        'time.sleep(120)\n')


def _holder(path):
    """Start a process holding state file ``path``; return it once it holds it."""
    proc = subprocess.Popen([sys.executable, '-c', HOLD, str(path)], stdout=subprocess.PIPE,
                            text=True, env=dict(os.environ))
    assert proc.stdout.readline().strip() == 'held'
    return proc


def _worker(state, rank=0):
    """Return a toy worker node of a two-worker fleet on ``state``, not configured."""
    return worker_node.WorkerNode(rog_worker.build_parser().parse_args(
        ['--workload', 'toy', '--workers', '2', '--namespace', '/lock', '--rank', str(rank),
         '--state-dir', str(state)]))


def test_a_worker_on_a_state_file_another_node_holds_stops_and_names_it(
        tmp_path, monkeypatch):
    """Refuse in one line naming the holder; another rank in the same folder starts."""
    # Arrange
    in_memory_fleet(monkeypatch)
    holder = _holder(tmp_path / 'worker_0.pt')
    try:
        wrk, other = _worker(tmp_path), _worker(tmp_path, rank=1)
        # Execute
        with pytest.raises(durable.StateError) as refused:
            wrk.configure()
        wrk.shutdown()               # (as run_node does: refused before its bus, no traceback)
        other.configure()            # (a fleet's nodes share the folder: no conflict)
        other.shutdown()
    finally:
        holder.kill()
        holder.wait()
    # Assert
    said = str(refused.value)
    assert '\n' not in said
    assert f'state file {tmp_path / "worker_0.pt"} is in use by another node' in said
    assert f'rog_worker 0, pid {holder.pid}' in said


def test_a_server_on_a_checkpoint_another_server_holds_stops(tmp_path, monkeypatch):
    """Refuse a second server on one --state-dir before it reads or writes anything."""
    # Arrange
    in_memory_fleet(monkeypatch)
    holder = _holder(tmp_path / 'state' / 'server.pt')
    try:
        srv = server_node.ServerNode(rog_server.build_parser().parse_args(
            ['--workload', 'toy', '--workers', '1', '--namespace', '/lock2', '--out',
             str(tmp_path / 'out'), '--state-dir', str(tmp_path / 'state')]))
        # Execute
        with pytest.raises(durable.StateError) as refused:
            srv.configure()
        srv.shutdown()
    finally:
        holder.kill()
        holder.wait()
    # Assert
    assert 'server.pt is in use by another node (rog_worker 0, pid' in str(refused.value)


def test_a_node_killed_with_sigkill_does_not_block_its_restart(tmp_path, monkeypatch):
    """Take the state file of a killed holder (its lock file stays, with its line)."""
    # Arrange
    in_memory_fleet(monkeypatch)
    holder = _holder(tmp_path / 'worker_0.pt')
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    wrk = _worker(tmp_path)
    # Execute
    wrk.configure()
    wrk.shutdown()
    # Assert
    lock = state_dir.lock_file(tmp_path / 'worker_0.pt')
    assert f'pid {os.getpid()}' in open(lock).read()


FORKED = ('import os, sys, time\n'
          'from rog_ros.nodes.durable import hold\n'
          "hold(sys.argv[1], 'rog_worker 0')\n"
          'if os.fork() == 0:\n'
          '    time.sleep(2.0)\n'          # (a DataLoader worker, until it sees its parent gone)
          '    os._exit(0)\n'
          "print('held', flush=True)\n"
          'time.sleep(120)\n')


def test_a_restart_waits_for_a_child_of_its_killed_node_to_let_go(tmp_path):
    """Wait while the named holder has ended and a child it forked holds the lock."""
    # Arrange
    proc = subprocess.Popen([sys.executable, '-c', FORKED, str(tmp_path / 'worker_0.pt')],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == 'held'
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # Execute
    started = time.monotonic()
    durable.hold(str(tmp_path / 'worker_0.pt'), 'rog_worker 0')
    # Assert
    assert time.monotonic() - started < durable.HOLD_WAIT_S
    assert f'pid {os.getpid()}' in open(state_dir.lock_file(tmp_path / 'worker_0.pt')).read()


def test_a_state_lock_file_that_is_a_link_is_refused_and_its_target_kept(tmp_path):
    """Refuse a lock file that is a symbolic link; the file it points to is not written."""
    # Arrange
    target = tmp_path / 'precious'
    target.write_text('keep me\n')
    os.symlink(str(target), state_dir.lock_file(tmp_path / 'worker_3.pt'))
    # Execute
    with pytest.raises(durable.StateError) as refused:
        durable.hold(str(tmp_path / 'worker_3.pt'), 'rog_worker 3')
    # Assert
    assert 'symbolic link' in str(refused.value)
    assert target.read_text() == 'keep me\n'


def test_rog_fleet_refuses_a_state_dir_whose_files_a_running_node_holds(tmp_path):
    """Say which file and holder before any node starts (check_state_dir)."""
    # Arrange
    holder = _holder(tmp_path / 'worker_0.pt')
    try:
        # Execute
        with pytest.raises(ConfigError) as refused:
            state_dir.check_state_dir('--state-dir', str(tmp_path))
    finally:
        holder.kill()
        holder.wait()
    # Assert
    assert str(refused.value).startswith(
        f'--state-dir {tmp_path}: state file worker_0.pt is in use by another node '
        f'(rog_worker 0, pid {holder.pid}')
    assert state_dir.check_state_dir('--state-dir', str(tmp_path)) == str(tmp_path)


HOLD_ONCE = ('import os, sys\n'
             'from rog_ros.nodes.durable import hold\n'
             "hold(sys.argv[1], 'rog_worker 0')\n"
             "print('held by', os.getpid(), flush=True)\n")


def _without_file_rights():
    """Return the command prefix that runs a process without root's file rights ([]: none)."""
    if os.geteuid() != 0:
        return []
    if shutil.which('setpriv') is None:
        pytest.skip('root without setpriv: cannot run a process bound by file permissions')
    caps = '-dac_override,-dac_read_search'
    return ['setpriv', f'--inh-caps={caps}', f'--bounding-set={caps}']


def test_a_lock_file_this_user_may_not_write_does_not_block_the_state_file(tmp_path):
    """Hold a state file whose lock file an earlier run left read-only to this user."""
    # Arrange: as a run as root in a container leaves it for the robot's user (0644, root's)
    lock = state_dir.lock_file(tmp_path / 'worker_0.pt')
    with open(lock, 'w') as fh:
        fh.write('rog_worker 0, pid 1, since 2026-01-01 00:00:00\n')
    os.chmod(lock, 0o444)
    # Execute
    done = subprocess.run(_without_file_rights() + [
        sys.executable, '-c', HOLD_ONCE, str(tmp_path / 'worker_0.pt')],
        capture_output=True, text=True, timeout=120, env=dict(os.environ))
    # Assert
    assert done.returncode == 0, done.stderr
    pid = done.stdout.split()[-1]
    assert f'rog_worker 0, pid {pid}, since' in open(lock).read()


ELSEWHERE = ('echo {last} > /proc/sys/kernel/ns_last_pid\n'     # (its pid: free out here)
             '{python} -c "$0" "$1"\n')


def _pid_namespace():
    """Return the command prefix that runs a process in a pid namespace of its own."""
    own = ['unshare', '--pid', '--fork', '--mount-proc']
    if os.geteuid() != 0:
        own[1:1] = ['--user', '--map-root-user']
    if shutil.which('unshare') is None or subprocess.run(
            own + ['true'], capture_output=True, timeout=30).returncode != 0:
        pytest.skip('no pid namespace can be made here')
    return own


def test_a_node_out_of_sight_holding_the_state_file_is_refused_at_once(tmp_path):
    """Refuse at once, saying so, a holder in another pid namespace (another container)."""
    # Arrange: a live node whose pid names no process here (as in another container)
    own = _pid_namespace()
    pid = next(p for p in range(20000, 30000) if not os.path.exists(f'/proc/{p}'))
    script = ELSEWHERE.format(last=pid - 1, python=sys.executable)
    proc = subprocess.Popen(own + ['sh', '-c', script, HOLD, str(tmp_path / 'worker_0.pt')],
                            stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert proc.stdout.readline().strip() == 'held'
        if f'pid {pid},' not in open(state_dir.lock_file(tmp_path / 'worker_0.pt')).read():
            pytest.skip('no pid of a new pid namespace can be chosen here')
        # Execute
        started = time.monotonic()
        with pytest.raises(durable.StateError) as refused:
            durable.hold(str(tmp_path / 'worker_0.pt'), 'rog_worker 0')
        took = time.monotonic() - started
    finally:
        proc.kill()
        proc.wait()
    # Assert
    assert f'rog_worker 0, pid {pid},' in str(refused.value)
    assert 'a node out of sight of this one' in str(refused.value)
    assert took < durable.HOLD_WAIT_S / 2


TRY_HOLD = ('import sys\n'
            'from rog_ros.nodes.durable import hold, StateError\n'
            'try:\n'
            "    hold(sys.argv[1], 'rog_worker 0')\n"
            'except StateError:\n'
            "    print('refused', flush=True)\n"
            'else:\n'
            "    print('held', flush=True)\n")


def _another_takes(path) -> bool:
    """Tell whether another process can take state file ``path`` now (and let it go)."""
    done = subprocess.run([sys.executable, '-c', TRY_HOLD, str(path)], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip() == 'held'


def test_a_cleaned_up_node_lets_go_of_its_state_file_and_takes_it_again_at_configure(
        tmp_path, monkeypatch):
    """Hold from configure to cleanup, again from the next configure, and let go at shutdown."""
    # Arrange
    in_memory_fleet(monkeypatch)
    wrk, path = _worker(tmp_path), tmp_path / 'worker_0.pt'
    # Execute
    wrk.configure()
    configured = _another_takes(path)
    wrk.cleanup()
    cleaned_up = _another_takes(path)
    started = time.monotonic()
    wrk.configure()                  # (its own hold, let go: taken again, no wait)
    took = time.monotonic() - started
    configured_again = _another_takes(path)
    wrk.shutdown()
    shut_down = _another_takes(path)
    # Assert
    assert (configured, cleaned_up, configured_again, shut_down) == (False, True, False, True)
    assert took < durable.HOLD_WAIT_S / 2


def test_a_shut_down_server_lets_go_though_a_process_it_forked_still_runs(tmp_path, monkeypatch):
    """Unlock at shutdown: a DataLoader worker forked with the lock open must not keep it."""
    # Arrange
    in_memory_fleet(monkeypatch)
    srv = server_node.ServerNode(rog_server.build_parser().parse_args(
        ['--workload', 'toy', '--workers', '1', '--namespace', '/lock3', '--out',
         str(tmp_path / 'out'), '--state-dir', str(tmp_path / 'state')]))
    srv.configure()
    child = os.fork()
    if child == 0:                   # (the lock's descriptor is open here too)
        time.sleep(60)
        os._exit(0)
    try:
        # Execute
        srv.shutdown()
        taken = _another_takes(tmp_path / 'state' / 'server.pt')
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    # Assert
    assert taken


ON_NFS = ('import errno, fcntl, os, sys\n'
          'real = fcntl.flock\n'
          'def flock(fd, op):\n'                 # (as NFS's: its exclusive lock needs writing)
          '    if op & fcntl.LOCK_EX and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == '
          'os.O_RDONLY:\n'
          '        raise OSError(errno.{code}, os.strerror(errno.{code}))\n'
          '    return real(fd, op)\n'
          'fcntl.flock = flock\n'
          'from rog_ros.nodes.durable import hold, StateError\n'
          'try:\n'
          "    hold(sys.argv[1], 'rog_worker 0')\n"
          'except StateError as exc:\n'
          "    print('refused:', exc, flush=True)\n"
          'else:\n'
          "    print('held', flush=True)\n")


@pytest.mark.parametrize('code', ['EBADF', 'ENOLCK'])
def test_a_read_only_lock_file_that_nfs_will_not_lock_is_one_line_saying_whose(tmp_path, code):
    """Refuse, naming the lock file, whose it is and a local --state-dir, where NFS refuses."""
    # Arrange: this user's own lock file made read-only, on a file system like NFS (it was
    # called another user's: test_output_lock has another user's and a read-only mount)
    lock = state_dir.lock_file(tmp_path / 'worker_0.pt')
    with open(lock, 'w') as fh:
        fh.write('rog_worker 0, pid 1, since 2026-01-01 00:00:00\n')
    os.chmod(lock, 0o444)
    # Execute
    done = subprocess.run(_without_file_rights() + [
        sys.executable, '-c', ON_NFS.format(code=code), str(tmp_path / 'worker_0.pt')],
        capture_output=True, text=True, timeout=120, env=dict(os.environ))
    # Assert
    assert done.returncode == 0, done.stderr
    said = done.stdout.strip()
    assert said.startswith('refused: cannot lock state file '), said
    assert '\n' not in said
    assert f"its lock file {lock} is this user's own, without write permission" in said
    assert f'({code}; NFS?); give this node a --state-dir on a local disk, or give it back its ' \
        'write permission (chmod u+w), or remove it' in said


def _failing_build(args):
    """Stand in for build_training: a configure that fails after the hold (bad input)."""
    raise ConfigError('--workload: no such data set')


@pytest.mark.parametrize('role', ['worker', 'server'])
def test_a_failed_configure_lets_go_of_the_state_file_it_took(tmp_path, monkeypatch, role):
    """Let go when configure fails: the node stays unconfigured and uses no state file."""
    # Arrange
    in_memory_fleet(monkeypatch)
    if role == 'worker':
        node, path, module = _worker(tmp_path), tmp_path / 'worker_0.pt', worker_node
    else:
        node = server_node.ServerNode(rog_server.build_parser().parse_args(
            ['--workload', 'toy', '--workers', '1', '--namespace', '/lock4', '--out',
             str(tmp_path / 'out'), '--state-dir', str(tmp_path)]))
        path, module = tmp_path / 'server.pt', server_node
    monkeypatch.setattr(module, 'build_training', _failing_build)
    # Execute
    with pytest.raises(ConfigError):
        node.configure()
    failed = _another_takes(path)
    node.shutdown()
    # Assert
    assert failed


def test_a_configure_refused_to_a_configured_node_keeps_its_hold(tmp_path, monkeypatch):
    """Keep the hold of a configured node that a second configure (refused) found in use."""
    # Arrange
    in_memory_fleet(monkeypatch)
    wrk, path = _worker(tmp_path), tmp_path / 'worker_0.pt'
    wrk.configure()
    # Execute
    with pytest.raises(Exception):
        wrk.configure()                  # (not from inactive: refused)
    again = _another_takes(path)
    wrk.cleanup()
    cleaned_up = _another_takes(path)
    wrk.shutdown()
    # Assert: held once (not counted twice), let go at cleanup
    assert (again, cleaned_up) == (False, True)


def test_a_cleaned_up_node_whose_file_another_took_meanwhile_is_refused_in_one_line(
        tmp_path, monkeypatch):
    """Refuse the re-configure in one line, and leave the other node's state file alone."""
    # Arrange: configured, cleaned up, then another node takes the file and writes it
    in_memory_fleet(monkeypatch)
    monkeypatch.setattr(durable, 'HOLD_WAIT_S', 1.0)
    wrk, path = _worker(tmp_path), tmp_path / 'worker_0.pt'
    wrk.configure()
    wrk.cleanup()
    other = _holder(path)
    path.write_bytes(b'the other node state')
    try:
        # Execute
        with pytest.raises(durable.StateError) as refused:
            wrk.configure()
        wrk.shutdown()
    finally:
        other.kill()
        other.wait(10)
        other.stdout.close()
    # Assert
    assert '\n' not in str(refused.value)
    assert f'rog_worker 0, pid {other.pid},' in str(refused.value)
    assert path.read_bytes() == b'the other node state'
    assert wrk.bus is None


def _eval_threads() -> int:
    """Count the server's evaluation threads alive in this process."""
    import threading
    return sum(t.name == 'rog-server-eval' for t in threading.enumerate())


def test_a_server_configure_failing_after_its_bus_closes_it_and_a_later_one_works(
        tmp_path, monkeypatch):
    """Close the bus (and the evaluation thread) of a failed configure: none left at the next."""
    # Arrange: a corrupt checkpoint, found after the bus is open (restore)
    hub = in_memory_fleet(monkeypatch)
    state = tmp_path / 'state'
    state.mkdir()
    (state / 'server.pt').write_bytes(b'\x80\x02not a checkpoint')
    threads = _eval_threads()
    srv = server_node.ServerNode(rog_server.build_parser().parse_args(
        ['--workload', 'toy', '--workers', '1', '--namespace', '/lock5', '--out',
         str(tmp_path / 'out'), '--state-dir', str(state)]))
    try:
        # Execute
        with pytest.raises(durable.StateError):
            srv.configure()
        failed = (len(hub.buses), srv.bus, _eval_threads() - threads,
                  _another_takes(state / 'server.pt'))
        (state / 'server.pt').unlink()       # (the user set it right)
        srv.configure()
        again = (len(hub.buses), srv.life.state, _eval_threads() - threads)
    finally:
        srv.shutdown()
    # Assert
    assert failed == (0, None, 0, True)
    assert again == (1, 'inactive', 1)
    assert hub.buses == []


def test_a_worker_configure_failing_after_its_bus_closes_it_and_a_later_one_works(
        tmp_path, monkeypatch):
    """Close the bus of a failed worker configure (its ledger not writable): one at the next."""
    # Arrange: --chaos-ledger names a file, found after the bus is open (the node's hooks)
    hub = in_memory_fleet(monkeypatch)
    ledger = tmp_path / 'ledger'
    ledger.write_text('a file, not a folder')
    args = rog_worker.build_parser().parse_args(
        ['--workload', 'toy', '--workers', '2', '--namespace', '/lock6', '--rank', '0',
         '--state-dir', str(tmp_path)])
    args.chaos_ledger = str(ledger)          # (--chaos-ledger: a hidden option of rog fleet)
    wrk = worker_node.WorkerNode(args)
    try:
        # Execute
        with pytest.raises(OSError):
            wrk.configure()
        failed = (len(hub.buses), wrk.bus, _another_takes(tmp_path / 'worker_0.pt'))
        ledger.unlink()
        wrk.configure()
        again = (len(hub.buses), wrk.life.state)
    finally:
        wrk.shutdown()
    # Assert
    assert failed == (0, None, True)
    assert again == (1, 'inactive')
    assert hub.buses == []


def _failing_report(*args, **kwargs):
    """Stand in for the chaos ledger's final report on a full disk."""
    raise OSError(28, 'No space left on device')


@pytest.mark.parametrize('role', ['worker', 'server'])
def test_a_shutdown_whose_ledger_report_fails_still_closes_the_bus_and_lets_go(
        tmp_path, monkeypatch, role):
    """Close the bus and let go of the state file though the ledger's report raises."""
    # Arrange
    from rog_ros.nodes import chaos_hooks
    hub = in_memory_fleet(monkeypatch)
    if role == 'worker':
        node, path = _worker(tmp_path), tmp_path / 'worker_0.pt'
        monkeypatch.setattr(chaos_hooks.WorkerHooks, 'close', _failing_report)
    else:
        node = server_node.ServerNode(rog_server.build_parser().parse_args(
            ['--workload', 'toy', '--workers', '1', '--namespace', '/lock7', '--out',
             str(tmp_path / 'out'), '--state-dir', str(tmp_path)]))
        path = tmp_path / 'server.pt'
        monkeypatch.setattr(chaos_hooks.ServerHooks, 'close', _failing_report)
    node.configure()
    # Execute
    with pytest.raises(OSError):
        node.shutdown()
    # Assert
    assert (hub.buses, node.bus, _another_takes(path)) == ([], None, True)


def _no_training(args):
    """Stand in for a training build that fails (a model file gone meanwhile)."""
    raise RuntimeError('no model')


def test_a_configure_again_failing_early_keeps_the_earlier_runs_ledger_report(
        tmp_path, monkeypatch):
    """Leave the cleaned-up run's ledger to shutdown's final report: not this configure's."""
    # Arrange: a server configured, cleaned up, then configured again in vain
    in_memory_fleet(monkeypatch)
    args = rog_server.build_parser().parse_args(
        ['--workload', 'toy', '--workers', '1', '--namespace', '/lock8', '--out',
         str(tmp_path / 'out'), '--state-dir', str(tmp_path / 'state')])
    args.chaos_ledger = str(tmp_path / 'ledger')   # (--chaos-ledger: a hidden option)
    srv = server_node.ServerNode(args)
    srv.configure()
    srv.cleanup()
    monkeypatch.setattr(server_node, 'build_training', _no_training)
    try:
        with pytest.raises(RuntimeError):
            srv.configure()
    finally:
        # Execute
        srv.shutdown()
    # Assert
    assert (tmp_path / 'ledger' / 'server.final.json').is_file()


def test_a_cleaned_up_worker_writes_its_ledger_report_at_shutdown(tmp_path, monkeypatch):
    """Write the chaos ledger's final report of a cleaned-up worker at shutdown, as a server."""
    # Arrange
    in_memory_fleet(monkeypatch)
    wrk = _worker(tmp_path / 'state')
    wrk.args.chaos_ledger = str(tmp_path / 'ledger')   # (--chaos-ledger: a hidden option)
    wrk.configure()
    wrk.cleanup()
    # Execute
    wrk.shutdown()
    # Assert
    assert (tmp_path / 'ledger' / 'worker_0.final.json').is_file()
    assert wrk.hooks.ledger is None                      # (closed)


@pytest.mark.parametrize('role', ['worker', 'server'])
def test_a_configure_again_closes_the_replaced_ledger_and_one_report_is_the_last_runs(
        tmp_path, monkeypatch, role):
    """Close each replaced run's ledger file at once; shutdown reports the last run alone."""
    # A configure after a cleanup replaced the hooks and left their ledger file to the
    # garbage collector: open until it ran, then a ResourceWarning, once per cycle
    import gc
    import json
    import warnings
    # Arrange
    in_memory_fleet(monkeypatch)
    if role == 'worker':
        node, name = _worker(tmp_path / 'state'), 'worker_0'
    else:
        node, name = server_node.ServerNode(rog_server.build_parser().parse_args(
            ['--workload', 'toy', '--workers', '1', '--namespace', '/lock9', '--out',
             str(tmp_path / 'out'), '--state-dir', str(tmp_path / 'state')])), 'server'
    node.args.chaos_ledger = str(tmp_path / 'ledger')   # (--chaos-ledger: a hidden option)
    files = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always', ResourceWarning)
        try:
            # Execute: three runs, each cleaned up, then configured again
            for _ in range(3):
                node.configure()
                files.append(node.hooks.ledger._fh)
                node.cleanup()
            node.configure()
            replaced_open = [not fh.closed for fh in files]
        finally:
            node.shutdown()
        del files
        gc.collect()
    # Assert
    leaked = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)
              and 'ledger' in str(w.message)]
    assert (replaced_open, leaked) == ([False] * 3, [])
    report = json.loads((tmp_path / 'ledger' / f'{name}.final.json').read_text())
    if role == 'worker':
        assert report['run'] == node.hooks.run            # (the last run's, not an earlier one)
    assert sorted(p.name for p in (tmp_path / 'ledger').iterdir()) == [
        f'{name}.final.json', f'{name}.jsonl']


@pytest.mark.parametrize('code', ['EROFS', 'EACCES'])
def test_a_state_folder_this_node_cannot_write_is_one_line_saying_what_to_do(
        tmp_path, monkeypatch, code):
    """Name the fix (a --state-dir it can write) when the lock file cannot be created."""
    # Arrange: the lock file's open refused as on a read-only mount or another user's folder
    import errno

    def refused(path, command):
        """Refuse the lock file as the kernel would."""
        raise OSError(getattr(errno, code), os.strerror(getattr(errno, code)), path)
    monkeypatch.setattr(durable, 'hold_lock_file', refused)
    # Execute
    with pytest.raises(durable.StateError) as refused_hold:
        durable.hold(str(tmp_path / 'worker_0.pt'), 'rog_worker 0')
    # Assert: one line, the error and the fix, naming the folder
    said = str(refused_hold.value)
    assert '\n' not in said and os.strerror(getattr(errno, code)) in said, said
    assert f'give this node a --state-dir it can write (a local disk), or make {tmp_path} ' \
        'writable' in said, said
    assert not os.path.exists(tmp_path / 'worker_0.pt')


def test_a_server_node_removes_its_journal_s_killed_writes_not_a_live_one(tmp_path, monkeypatch):
    # Arrange: a server killed while it emptied its journal (at a checkpoint) left the
    # journal's temporary file; only rog fleet's start removed those, and a server robot
    # (rog robot, ros2 launch) restarted again and again left one more each time
    import fcntl
    from rog_ros.atomic import WRITE_TEMP_PREFIX
    from rog_ros.nodes.push_journal import JOURNAL_FILE
    in_memory_fleet(monkeypatch)
    state = tmp_path / 'state'
    state.mkdir()
    killed = state / f'{WRITE_TEMP_PREFIX}abcdefgh{JOURNAL_FILE}'
    live = state / f'{WRITE_TEMP_PREFIX}ijklmnop{JOURNAL_FILE}'
    other = state / f'{WRITE_TEMP_PREFIX}qrstuvwxnotes.txt'
    for path in (killed, live, other):
        path.write_bytes(b'j' * 4096)
    writing = os.open(str(live), os.O_RDWR)
    fcntl.flock(writing, fcntl.LOCK_EX)           # (a write going on now)
    srv = server_node.ServerNode(rog_server.build_parser().parse_args(
        ['--workload', 'toy', '--workers', '1', '--namespace', '/lock9', '--out',
         str(tmp_path / 'out'), '--state-dir', str(state)]))
    try:
        # Act
        srv.configure()
        # Assert: the killed write's is gone; the live one and another file's stay
        assert not killed.exists()
        assert live.read_bytes() == b'j' * 4096 and other.read_bytes() == b'j' * 4096
    finally:
        srv.shutdown()
        os.close(writing)
