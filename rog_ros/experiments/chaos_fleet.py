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
The fleet of one ``rog chaos`` scenario: its options, its shaped link trace, its processes.

Every scenario starts the fleet of :mod:`rog_ros.nodes.plan` (server and workers as OS
processes on the embedded Cyclone DDS, loopback, a DDS domain and a namespace of their own) on
the small ``chaos`` workload, with links shaped to a slow constant rate so that a transfer
spans several chunks and tens of milliseconds: a kill lands in the middle of one. ``Fleet``
starts, kills, restarts and waits for those processes; the scenarios
(:mod:`.chaos_scenarios`, :mod:`.chaos_link_outage`) say when.
"""

from __future__ import annotations

import dataclasses
import os
import random
import signal
import subprocess
import sys
import time

from rog_ros.nodes.supervisor import repo_pythonpath, Supervisor

WORKLOAD = 'chaos'
RATE_MBPS = 0.1          # 12.5 kB/s: a push of the chaos model (~0.8 kB in 3 chunks) ~70 ms
CHUNK_BYTES = 256        # several chunks per transfer, so a kill lands mid-transfer
BURST_BYTES = 512
THAW_GUARD_S = 5.0      # a frozen node's guard thaws it this long after its freeze was to end
TRACE_PERIOD_S = 10000.0  # per-worker slice of the outage trace: no other worker meets it
DURABLE_SYSTEMS = ('rog', 'ssp', 'bsp', 'flown')
"""Systems with server checkpoints, worker state and the chaos ledger: every scenario."""
PUSH_CHAOS_SYSTEMS = ('adacomp', 'asgd', 'comp-asgd', 'gsp')
"""The push systems: judged by :mod:`.chaos_push` (server-restart with a checkpoint a push)."""
CHAOS_SYSTEMS = DURABLE_SYSTEMS + PUSH_CHAOS_SYSTEMS
"""Systems the scenarios run."""


@dataclasses.dataclass
class ChaosConfig:
    """What every scenario shares."""

    out: str = 'rog_chaos'           # one sub-directory per scenario
    workers: int = 3
    iterations: int = 30
    outage_s: float = 90.0           # link-outage: seconds at 0 Mbit/s
    flood_s: float = 3.0             # flood: seconds of hostile traffic
    seed: int = 0
    sync: str = 'rog'                # the fleet's system (CHAOS_SYSTEMS; staleness 4)
    timeout_s: float = 120.0         # per scenario, on top of the outage
    restart_gap_s: float = 0.5       # worker-restart: seconds between the kill and the restart
    python: str = sys.executable
    fleet_key_file: str = ''         # the key of every scenario's nodes ('': scenario_key)
    auth: bool = False               # no key given: a new one per scenario
    robot_keys: bool = False         # robot_keys on every node (with no key given: auth)


def write_trace(path: str, workers: int, rate: float, outage=None) -> None:
    """
    Write a constant-rate trace file; ``outage=(rank, start_s, seconds)`` puts a link at 0.

    ``link_for`` reads a file trace at ``t + rank * end / N``: with ``end = N * P`` each rank
    has its own slice of length P, so the outage reaches only ``rank``.
    """
    from rog_ros.net.traces import save_trace, Trace
    end = workers * TRACE_PERIOD_S
    t, r = [0.0], [rate]
    if outage is not None:
        rank, start, seconds = outage
        t += [rank * TRACE_PERIOD_S + start, rank * TRACE_PERIOD_S + start + seconds]
        r += [0.0, rate]
    save_trace(Trace(t, r, end), path)


class Fleet:
    """The nodes of one scenario: start, kill, restart, wait."""

    def __init__(self, cfg: ChaosConfig, run_dir: str, trace: str, extra=None,
                 key_env=None, iterations=None, server_extra=None):
        from rog_ros.nodes.connect import FLEET_KEY_SAID_ENV
        from rog_ros.nodes.fleet import default_domain
        from rog_ros.nodes.plan import plan
        from rog_ros.transport.cyclone_config import config_path, file_uri
        self.cfg, self.dir = cfg, run_dir
        self.ledger_dir = os.path.join(run_dir, 'ledger')
        self.state_dir = os.path.join(run_dir, 'state')
        os.makedirs(os.path.join(run_dir, 'logs'), exist_ok=True)
        self.namespace = f'/rog_chaos_{os.getpid()}_{random.getrandbits(24)}'
        self.iterations = iterations or cfg.iterations
        # the nodes' trace time 0: a wall time for them (each reads it onto its monotonic
        # clock at its start), and the same instant on this process's monotonic clock, which
        # the ledgers' ``mono`` stamps share (one host), for timing a scenario without the
        # wall clock, which NTP may step during the run
        wall, self.epoch_mono = time.time(), time.monotonic()
        specs = plan(overrides={
            'workload': WORKLOAD, 'sync': cfg.sync, 'workers': cfg.workers,
            'iterations': self.iterations,
            'seed': cfg.seed, 'trace': trace, 'chunk_bytes': CHUNK_BYTES,
            'burst_bytes': BURST_BYTES, 'eval_every': max(1, self.iterations // 3),
            'out': run_dir, 'bus': 'dds', 'epoch': wall, 'namespace': self.namespace,
            'netmon': False, 'startup_timeout': 60.0})
        self.specs = {}
        # a push system runs without state (its server's checkpoints are for the one
        # scenario left out, server-restart) and its engines hold no residual to keep a
        # ledger of: the scenario watches its pushes (chaos_push)
        self.push = cfg.sync in PUSH_CHAOS_SYSTEMS
        durable = {} if self.push else {'state_dir': self.state_dir,
                                        'chaos_ledger': self.ledger_dir}
        for spec in specs:
            params = dict(spec.parameters, **durable)
            params.update(extra or {})
            if cfg.robot_keys:
                params['robot_keys'] = True
            if spec.role == 'server':
                if not self.push:
                    params['checkpoint_every'] = 5
                params.update(server_extra or {})     # (a push server's state_dir: here)
            if spec.role == 'worker':
                params['server_timeout'] = 60.0 + cfg.outage_s
            self.specs[spec.name] = dataclasses.replace(spec, parameters=params)
        self.domain = default_domain()
        self.env = dict(os.environ, ROS_DOMAIN_ID=str(self.domain), ROG_BUS='dds',
                        PYTHONUNBUFFERED='1', OMP_NUM_THREADS='1',
                        CYCLONEDDS_URI=file_uri(config_path('loopback')),
                        PYTHONPATH=repo_pythonpath(), **(key_env or {}))
        self.env[FLEET_KEY_SAID_ENV] = '1'     # (every robot on this machine: as rog fleet)
        self.env.pop('ROG_CHAOS_LEDGER', None)
        self.env.pop('ROG_CHAOS_FAULTS', None)
        self.sup = Supervisor(list(self.specs.values()), os.path.join(run_dir, 'logs'),
                              lambda spec: self.env, python=cfg.python)

    def start(self, name=None) -> None:
        """Start every node, or one again (after ``kill``: its log is appended to)."""
        if name is None:
            self.sup.start()
        else:
            self.sup.restart(name)

    def kill(self, name: str, sig=signal.SIGKILL) -> None:
        self.sup.kill(name, sig)

    def signal(self, name: str, sig) -> None:
        """
        Send ``sig`` to node ``name`` and what it started, without waiting for it to exit.

        For SIGSTOP and SIGCONT (the freeze): ``kill`` waits for the process to end, which a
        stopped one never does.
        """
        try:
            os.killpg(self.sup.procs[name].pid, sig)
        except ProcessLookupError:
            pass

    def thaw_guard(self, name: str) -> subprocess.Popen:
        """
        Start the guard of a later ``freeze`` of node ``name``: it waits, unarmed, on its stdin.

        The guard is a process of its own session, which outlives this one: killed outright
        (SIGKILL, the OOM killer, a test runner's timeout), this process sends no SIGCONT, and
        the nodes' parent-death SIGTERM is never acted on by a stopped process. Started before
        the freeze is due, so that arming it costs a pipe write (the freeze must land in the
        push the node just began, and starting a process takes milliseconds, far more on a
        loaded machine); a guard never armed exits when this process closes its stdin or dies.
        """
        return subprocess.Popen(
            [sys.executable, '-c', THAW_GUARD, str(self.sup.procs[name].pid)],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)

    def freeze(self, name: str, seconds: float, guard=None) -> subprocess.Popen:
        """
        SIGSTOP node ``name``; return its guard, armed to SIGCONT it ``THAW_GUARD_S`` later.

        The caller thaws it itself after ``seconds`` (the guard: ``seconds + THAW_GUARD_S``)
        and then kills the guard (``kill``, ``wait``). ``guard`` is one ``thaw_guard`` started
        earlier (one is started now if None). Armed first, SIGSTOP after: killed between the
        two, this process leaves the node running; the other order (the guard started after
        the SIGSTOP) left the node stopped for good when this process was killed before the
        guard's start (a fresh-clone CI at load 8 killed it there).
        """
        if guard is None:
            guard = self.thaw_guard(name)
        guard.stdin.write(f'{seconds + THAW_GUARD_S!r}\n'.encode())
        guard.stdin.flush()
        self.signal(name, signal.SIGSTOP)
        return guard

    def codes(self) -> dict:
        return self.sup.codes()

    def wait(self, timeout_s: float, poll=None) -> tuple:
        """Wait until every node exited; return (finished, reason)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            codes = self.codes()
            bad = {n: c for n, c in codes.items() if c not in (None, 0)}
            if bad:
                return False, f'exited with error: {bad}'
            if all(c == 0 for c in codes.values()):
                return True, ''
            if poll is not None:
                poll()
            time.sleep(0.1)
        return False, f'not finished after {timeout_s:.0f} s'

    def stop(self) -> None:
        """Stop whatever still runs: SIGINT, SIGTERM, SIGKILL (the supervisor's bounds)."""
        self.sup.stop()

    def tail(self, name: str, lines: int = 8) -> str:
        return self.sup.tail(name, lines)


THAW_GUARD = """
import os, signal, sys, time
armed = sys.stdin.readline()
if armed:
    time.sleep(float(armed))
    try:
        os.killpg(int(sys.argv[1]), signal.SIGCONT)
    except OSError:
        pass
"""
"""``Fleet.thaw_guard``'s process: ``python -c THAW_GUARD PGID``, armed by a line on its stdin
(the seconds to wait), thaws a process group; stdin closed unarmed, it exits."""


def wait_for(cond, timeout_s: float, fleet: Fleet) -> bool:
    """Wait until ``cond()``; False after ``timeout_s`` or once a node failed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        if any(c not in (None, 0) for c in fleet.codes().values()):
            return False
        time.sleep(0.02)
    return False
