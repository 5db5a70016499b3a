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
The fault scenarios of ``rog chaos``, by name, and the runner of each.

``RUNNERS`` maps every name of ``SCENARIOS`` (in the order ``--scenario all`` runs them) to a
function ``cfg -> result row``. worker-restart, server-restart, loss-dup-reorder and flood
inject their fault into a fleet (:mod:`.chaos_fleet_scenario`); link-outage, which may plan
itself again, has a module of its own (:mod:`.chaos_link_outage`); ctrl-c sends SIGINT to a
``rog fleet`` supervisor and checks that every node stopped within a bound.
"""

from __future__ import annotations

import glob
import os
import random
import signal
import subprocess
import time

from rog_ros.experiments.chaos_auth import auth_result, given_key
from rog_ros.experiments.chaos_fleet import (ChaosConfig, PUSH_CHAOS_SYSTEMS, RATE_MBPS,
                                             wait_for, WORKLOAD, write_trace)
from rog_ros.experiments.chaos_fleet_scenario import (fleet_scenario, ledger_problems,
                                                      result_row, VICTIM)
from rog_ros.experiments.chaos_freeze import freeze
from rog_ros.experiments.chaos_ledger_folder import (check_ledger, count_records, ledger_runs,
                                                     read_json, read_ledger_file,
                                                     wait_new_record)
from rog_ros.experiments.chaos_link_outage import link_outage
from rog_ros.experiments.chaos_push import push_rejects, PushWatch
from rog_ros.nodes.state_dir import SERVER_STATE_FILE
from rog_ros.nodes.supervisor import repo_pythonpath

SCENARIOS = ('worker-restart', 'freeze', 'server-restart', 'link-outage', 'loss-dup-reorder',
             'flood', 'ctrl-c')
FAULTS = 'loss=0.05,dup=0.05,reorder=0.05'
STOP_BOUND_S = 30.0      # ctrl-c: every node gone within this


def worker_restart(cfg: ChaosConfig) -> dict:
    """Kill a worker right after it computed (mid-push), start it again, check it resumes."""
    killed = {}

    def inject(fleet):
        if fleet.push:
            return _push_worker_restart(cfg, fleet, killed)
        path = os.path.join(fleet.ledger_dir, f'worker_{VICTIM}.jsonl')
        target = max(3, cfg.iterations // 3)
        if not wait_for(lambda: count_records(path, 'computed') >= target, 90, fleet):
            return None, f'worker {VICTIM} never reached iteration {target}'
        # the next computation's line, right before its push leaves: kill on sight
        wait_new_record(path, 'computed', 10)
        fleet.kill(f'rog_worker_{VICTIM}')
        old = ledger_runs(path)
        last = [r for r in read_ledger_file(path) if r['kind'] in ('computed', 'commit')][-1]
        killed['mid_transfer'] = last['kind'] == 'computed'    # pushed, not yet committed
        time.sleep(cfg.restart_gap_s)
        fleet.start(f'rog_worker_{VICTIM}')
        t = time.monotonic()

        def resumed():
            new = [r for r in ledger_runs(path) if r not in old]
            return bool(new) and count_records(path, 'computed', new[0]) > 0
        if not wait_for(resumed, 90, fleet):
            return None, f'worker {VICTIM} did not compute again after its restart'
        return round(time.monotonic() - t, 3), ''

    def mid_transfer(res, fleet):
        res['killed_mid_transfer'] = killed.get('mid_transfer')
        return [] if killed.get('mid_transfer') else [
            f'worker {VICTIM} was not killed in the middle of a push']
    # A quorum of the whole fleet: the killed worker's dead push makes the outage rule suspend
    # it within a second or two, and without a quorum the others may then finish the run before
    # a slow restart (torch import, DDS discovery: 3-10 s on a loaded machine) is back, which
    # leaves it nothing to compute (stop-after-fleet) and this scenario nothing to check.
    # (A push system has no quorum, nor needs one: its server answers every push, and a
    # robot back after the run ended is told to stop at its first push.)
    quorum = {} if cfg.sync in PUSH_CHAOS_SYSTEMS else {'min_workers': cfg.workers}
    return fleet_scenario('worker-restart', cfg, inject, extra_check=mid_transfer,
                          server_extra=quorum)


def _push_worker_restart(cfg: ChaosConfig, fleet, killed: dict) -> tuple:
    """
    Kill a push system's worker on its push's first chunk on the wire; start it again.

    Return ``(recover_s, detail)``: the seconds from the restart to the new run's first push.
    The push is in flight when the model that answers it had not arrived whole at the kill
    (``killed['mid_transfer']``: the robot's final ack of it not seen); the new run computes
    at the model it starts from, and its first push is dropped and answered with the current
    model (``worker_restart``).
    """
    watch = fleet.watch
    target = max(3, cfg.iterations // 3)
    if not wait_for(lambda: watch.count(VICTIM) >= target, 90, fleet):
        return None, f'worker {VICTIM} never pushed {target} times'
    seen = watch.count(VICTIM)
    if not wait_for(lambda: watch.count(VICTIM) > seen, 10, fleet):
        return None, f'worker {VICTIM} stopped pushing'
    first = watch.first_times(VICTIM)[-1]
    fleet.kill(f'rog_worker_{VICTIM}')
    fleet.kills += 1
    killed['mid_transfer'] = not watch.answered(VICTIM, first)     # its model not in yet
    old = watch.runs(VICTIM)
    time.sleep(cfg.restart_gap_s)
    fleet.start(f'rog_worker_{VICTIM}')
    t = time.monotonic()
    if not wait_for(lambda: any(r not in old for r in watch.runs(VICTIM)), 90, fleet):
        return None, f'worker {VICTIM} did not push again after its restart'
    return round(time.monotonic() - t, 3), ''


def server_restart(cfg: ChaosConfig) -> dict:
    """Kill the server once it checkpointed, start it again, check it restored and went on."""
    from rog_ros.nodes import durable
    from rog_ros.protocol.ps import ServerEngine
    if cfg.sync in PUSH_CHAOS_SYSTEMS:
        return _push_server_restart(cfg)
    if not durable.supported(ServerEngine):
        return result_row('server-restart', runtime_s=0.0, detail='the server engine cannot '
                          'save its state (no state_dict): nothing to restart from')

    def inject(fleet):
        path = os.path.join(fleet.ledger_dir, 'server.jsonl')
        if not wait_for(lambda: count_records(path, 'checkpoint') >= 1
                        and count_records(path, 'applied') >= cfg.workers * (5 + 2),
                        90, fleet):
            return None, 'the server never checkpointed'
        fleet.kill('rog_server')
        applied = count_records(path, 'applied')
        time.sleep(0.5)
        fleet.start('rog_server')
        t = time.monotonic()
        if not wait_for(lambda: count_records(path, 'applied') > applied, 90, fleet):
            return None, 'no push applied after the server restarted'
        return round(time.monotonic() - t, 3), ''

    def restored(res, fleet):
        final = read_json(os.path.join(fleet.ledger_dir, 'server.final.json')) or {}
        if not final.get('restored_from'):
            return ['the server did not restore a checkpoint']
        return _record_goes_on(fleet.dir)
    return fleet_scenario('server-restart', cfg, inject, extra_check=restored)


PUSH_CHECKPOINT_EVERY = 10
"""
A push server's ``checkpoint_every`` in ``rog chaos``'s server-restart: the fleet default, 10.

Its restart is exactly-once for every K: each push applied is in the server's write-ahead
journal before its answer leaves (``push_journal``), so the restored server (the checkpoint,
then the journal replayed) holds every push a robot moved on from, and a push whose answer
the crash lost comes again (``push_resent``, applied once). The scenario kills the server
with 1 to 9 pushes in the journal, as a fleet run with the default K would be. Before the
journal (2026-12-07) it ran with K = 1, a whole checkpoint before every answer.
"""


def _push_server_restart(cfg: ChaosConfig) -> dict:
    """
    Kill a push system's server once it checkpointed, start it again, check it went on.

    Judged as every push scenario (``chaos_push.push_verdict``): every push seen on the wire
    taken once (no kill of a robot: none may be lost), the budget applied, a stop order for
    every robot; and the run record goes on from the checkpoint (``_record_goes_on``).
    """
    run_dir = os.path.abspath(os.path.join(cfg.out, 'server-restart'))
    state = os.path.join(run_dir, 'state')

    def inject(fleet):
        """Kill the server once it checkpointed and pushes flowed; start it again."""
        path = os.path.join(state, SERVER_STATE_FILE)
        watch = fleet.watch
        if not wait_for(lambda: os.path.exists(path)
                        and len(watch.confirmed()) >= cfg.workers * (5 + 2), 90, fleet):
            return None, 'the server never checkpointed'
        fleet.kill('rog_server')
        seen = len(watch.confirmed())
        time.sleep(0.5)
        fleet.start('rog_server')
        t = time.monotonic()
        if not wait_for(lambda: len(watch.confirmed()) > seen + cfg.workers, 90, fleet):
            return None, 'no push taken after the server restarted'
        return round(time.monotonic() - t, 3), ''

    def restored(res, fleet):
        """Return what is wrong with the restored server's run record."""
        return _record_goes_on(fleet.dir)
    return fleet_scenario('server-restart', cfg, inject, extra_check=restored,
                          server_extra={'state_dir': state,
                                        'checkpoint_every': PUSH_CHECKPOINT_EVERY})


def _record_goes_on(run_dir: str) -> list:
    """Return what is wrong with a restored server's run record (it must start with the run)."""
    from rog_ros.experiments.membership import read_events
    from rog_ros.metrics import read_timeseries
    try:
        rows = read_timeseries(os.path.join(run_dir, 'timeseries.csv'))
        events = read_events(os.path.join(run_dir, 'events.csv'))
    except (OSError, ValueError) as err:
        return [f'no run record after the restart ({err})']
    problems = []
    if not rows or rows[0].get('iteration') != 0:
        problems.append('timeseries.csv does not start at iteration 0: the record of the run '
                        'before the restart was lost')
    times = [r.get('time_s') or 0.0 for r in rows]
    if times != sorted(times):
        problems.append('timeseries.csv goes back in time after the restart')
    if not any(e.get('event') == 'server_restored' for e in events):
        problems.append('events.csv does not say that the server restarted')
    return problems


def loss_dup_reorder(cfg: ChaosConfig) -> dict:
    """Run a fleet whose every message may be lost, duplicated or reordered (``FAULTS``)."""
    faults = f'{FAULTS},seed={cfg.seed + 1}'
    return fleet_scenario('loss-dup-reorder', cfg, lambda fleet: (None, ''),
                          extra={'chaos_faults': faults})


def ctrl_c(cfg: ChaosConfig) -> dict:
    """Send SIGINT to a ``rog fleet`` and check that every node stopped within ``STOP_BOUND_S``."""
    name = 'ctrl-c'
    run_dir = os.path.abspath(os.path.join(cfg.out, name))
    ledger_dir = os.path.join(run_dir, 'ledger')
    os.makedirs(run_dir, exist_ok=True)
    trace = os.path.join(run_dir, 'trace.csv')
    write_trace(trace, cfg.workers, RATE_MBPS)
    namespace = f'/rog_chaos_{os.getpid()}_{random.getrandbits(24)}'
    cmd = [cfg.python, '-m', 'rog_ros.nodes.fleet', '--workload', WORKLOAD,
           '--workers', str(cfg.workers), '--iterations', '100000', '--trace', trace,
           '--out', run_dir, '--namespace', namespace, '--no-netmon', '--quiet',
           '--seed', str(cfg.seed), '--sync', cfg.sync]
    # rog fleet takes the key as given here; none given, it makes one in run_dir/fleet.key
    key_path, key = given_key(cfg)
    if key_path:
        cmd += ['--fleet-key-file', key_path]
    if cfg.robot_keys:
        cmd += ['--robot-keys', 'true']
    push = cfg.sync in PUSH_CHAOS_SYSTEMS      # (no ledger: their engines hold no residual)
    env = dict(os.environ, PYTHONPATH=repo_pythonpath(), OMP_NUM_THREADS='1',
               ROG_CHAOS_LEDGER=ledger_dir)
    env.pop('ROG_CHAOS_FAULTS', None)
    watch = None
    if push:        # watched on the wire, in a domain of its own (rog fleet's own pick)
        env.pop('ROG_CHAOS_LEDGER')
        from rog_ros.nodes.fleet import default_domain
        domain = default_domain()
        cmd += ['--domain-id', str(domain)]
        watch = PushWatch(domain, namespace, cfg.workers)
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                text=True, start_new_session=True)
    except BaseException:
        if watch is not None:       # (its thread and DDS participant: not left behind)
            watch.close()
        raise
    problems, stop_s = [], None
    try:
        paths = [os.path.join(ledger_dir, f'worker_{r}.jsonl') for r in range(cfg.workers)]
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            if push and all(watch.count(r) >= 5 for r in range(cfg.workers)):
                break
            if not push and all(count_records(p, 'computed') >= 5 for p in paths):
                break
            time.sleep(0.1)
        else:
            problems.append('the fleet did not train before Ctrl-C')
        t_int = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            _, stderr = proc.communicate(timeout=STOP_BOUND_S + 30)
        except subprocess.TimeoutExpired:
            problems.append(f'rog fleet still running {STOP_BOUND_S + 30:.0f} s after SIGINT')
            os.killpg(proc.pid, signal.SIGKILL)
            _, stderr = proc.communicate()
        stop_s = round(time.monotonic() - t_int, 3)
        if stop_s > STOP_BOUND_S:
            problems.append(f'stopping took {stop_s:.1f} s (bound {STOP_BOUND_S:.0f} s)')
        if proc.returncode != 130:
            problems.append(f'rog fleet exited {proc.returncode}: {stderr.strip()[-300:]}')
        if not os.path.exists(os.path.join(run_dir, 'summary.json')):
            problems.append('no summary.json after Ctrl-C')
        alive = _node_pids(namespace)
        if alive:
            problems.append(f'node processes still alive: {alive}')
            for pid in alive:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if watch is not None:
            watch.close()
    if push:    # interrupted: no budget to account; stopped in time, summary written
        res = result_row(name, recover_s=stop_s, rejected=push_rejects(run_dir),
                         runtime_s=round(time.monotonic() - t0, 1))
    else:
        verdict, rejects, _, _ = check_ledger(ledger_dir)
        res = result_row(name, recover_s=stop_s, rejected=rejects,
                         runtime_s=round(time.monotonic() - t0, 1))
        problems += ledger_problems(res, verdict)
    if key is None and os.path.exists(os.path.join(run_dir, 'fleet.key')):
        from rog_ros.nodes.fleet_key import read_key_file
        key = read_key_file(os.path.join(run_dir, 'fleet.key'))
    log_dir = os.path.join(run_dir, 'logs')
    names = sorted(os.path.basename(p)[:-len('.log')]
                   for p in glob.glob(os.path.join(log_dir, '*.log')))
    problems += auth_result(res, log_dir, names, key, cfg.robot_keys)
    res['outcome'] = 'ok' if not problems else 'failed'
    res['detail'] = '; '.join(problems)[:600]
    return res


def _node_pids(namespace: str) -> list:
    """Live processes whose command line names ``namespace`` (a fleet's nodes)."""
    pids = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open(f'/proc/{entry}/cmdline', 'rb') as fh:
                cmd = fh.read().split(b'\0')
        except OSError:
            continue
        if b'rog_ros.nodes' in b' '.join(cmd) and namespace.encode() in cmd:
            pids.append(int(entry))
    return pids


def flood(cfg: ChaosConfig) -> dict:
    """Flood a training fleet with hostile messages and check that every one was dropped."""
    from rog_ros.experiments import chaos_flood
    sent = {}

    def inject(fleet):
        path = os.path.join(fleet.ledger_dir, 'server.jsonl')
        if fleet.push:      # (no ledger: the pushes seen on the wire)
            def trained():
                return sum(fleet.watch.count(r) for r in range(cfg.workers)) >= cfg.workers * 3
        else:
            def trained():
                return count_records(path, 'applied') >= cfg.workers * 3
        if not wait_for(trained, 90, fleet):
            return None, 'the fleet did not train before the flood'
        sent.update(chaos_flood.flood(fleet.domain, fleet.namespace, cfg.workers, cfg.flood_s,
                                      seed=cfg.seed))
        if any(c is not None for c in fleet.codes().values()):
            return None, 'the fleet stopped during the flood (raise --iterations)'
        return None, ''

    def all_rejected(res, fleet):
        """Check that every hostile message was dropped; the fuzzed ones (a tag) as bad_tag."""
        total = sum(sent.values())
        got = sum(v for k, v in res['rejected'].items() if k != 'replay')
        res['flood_sent'] = dict(sent)
        problems = [] if got >= total else [f'{total} hostile messages sent, {got} rejected']
        if sent.get('fuzzed') and not res['rejected'].get('bad_tag'):
            problems.append(f"{sent['fuzzed']} fuzzed messages with a made-up tag sent, none "
                            'dropped as bad_tag')
        return problems
    # training must outlast the flood, so that every hostile message meets a node (~0.2 s
    # per iteration)
    return fleet_scenario('flood', cfg, inject, extra_check=all_rejected, flood=True,
                          iterations=max(cfg.iterations, 20 + int(25 * cfg.flood_s)))


RUNNERS = {'worker-restart': worker_restart, 'freeze': freeze,
           'server-restart': server_restart,
           'link-outage': link_outage, 'loss-dup-reorder': loss_dup_reorder,
           'flood': flood, 'ctrl-c': ctrl_c}
