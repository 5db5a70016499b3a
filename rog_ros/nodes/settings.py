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
Settings: every node parameter declared once (name, type, default, range, description, roles).

From :data:`SETTINGS` come the command-line flags of each node and of ``rog fleet``
(:func:`add_arguments`), the ROS 2 parameters with their descriptors
(:func:`declare_ros_parameters`), the keys a ``config/*.yaml`` file may hold
(:func:`check_parameter_file`), the launch arguments (:func:`launch_arguments`) and
``docs/configuration.md`` (:func:`configuration_reference`).

Values are resolved as ROS 2 resolves parameters, later wins: declared defaults, then
``--params-file`` (sections ``/**``, the executable, the node name and its fully qualified
name, ``*`` and ``**`` globs allowed),
then command-line flags, then ``--ros-args -p name:=value``. Settings whose default is None
("not set") are written ``none_text`` where a typed value is required (ROS parameters,
launch arguments): ``lr: 0.0`` means "the workload's learning rate".
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
import errno
import fnmatch
import math
import os
import re
import stat
import sys

from rog_ros.checks import ConfigError, MAX_FLEET_ITERATIONS, MAX_SEED, MAX_STALENESS, \
    output_file
from rog_ros.nodes import ros_names
from rog_ros.nodes.sync_names import FLEET_SYSTEMS, PUSH_SYSTEMS, ROG_SYSTEMS, sim_only_reason
from rog_ros.protocol.policy_defaults import DEFAULT_DEADLINE_FLOOR as POLICY_DEADLINE_FLOOR
from rog_ros.protocol.policy_defaults import (DEFAULT_OUTAGE_BOUND, DEFAULT_RTT_FLOOR,
                                              OUTAGE_BOUND_RANGE, ROG_FREE_STRAGGLERS)
from rog_ros.protocol.revival import POKE_END_TIMEOUTS, shortest_sound_absence_s
from rog_ros.transport.topics import DEFAULT_NAMESPACE

MAX_TRACE_SCALE = 1e6
"""Largest ``trace_scale``: 1e308 passed the check, then every node's trace was refused at its
start (rates not finite), after the fleet had started."""
MAX_EPOCH = 1e10
"""Latest ``epoch``, a wall time (the year 2286): 1e308 passed the check, and every link's
trace time, -1e308 + t, stayed one float for the whole run (the link froze at one rate)."""
FREE_STRAGGLERS_DEFAULT = ROG_FREE_STRAGGLERS
"""Whether a robot too slow for any slack runs free by default (Rog's policy decides)."""

SERVER, WORKER, NETMON, FLEET = 'rog_server', 'rog_worker', 'netmon', 'fleet'
NODES = (SERVER, WORKER, NETMON)
TRAINING = (SERVER, WORKER, FLEET)
ALL = (SERVER, WORKER, NETMON, FLEET)
ALL_NODES = '/**'

DEFAULT_DEADLINE_FLOOR = POLICY_DEADLINE_FLOOR
"""Rog's deadline floor in compute times: 0, the paper's MTA-time deadline, in fleets as in the
simulator (one default, ``SyncPolicy.deadline_floor``). The floor that keeps fleets from
cutting transfers to a few milliseconds is ``rtt_floor`` (docs/scheduling.md)."""


@dataclass(frozen=True)
class Setting:
    """One parameter: its declaration is the only place its type, range and meaning live."""

    name: str                   # snake_case: ROS parameter, YAML key; flag is --kebab-case
    kind: type                  # int, float, str or bool
    default: object             # None: "not set" (see none_text)
    description: str            # one sentence, shown by --help, ros2 param describe, docs
    roles: tuple = ALL          # executables (and 'fleet' = the rog fleet CLI) that accept it
    group: str = 'fleet'        # 'fleet' (identical on every node), 'link', or a role's own
    low: float = None           # inclusive range; None = open
    high: float = None
    low_open: bool = False      # low itself is refused too: the range is (low, high]
    choices: tuple = ()         # allowed values of a str setting (empty: any)
    none_text: object = None    # typed stand-in for None in ROS/launch/YAML (e.g. 0.0, '')
    refusal: object = None      # name -> why a value outside choices is refused ('' if not)
    vetting: object = None      # value in range -> why it still cannot work ('' if it can)
    joiner: str = ''            # a str setting that lists items: what separates them

    @property
    def flag(self) -> str:
        """Return the command-line flag: ``eval_every`` -> ``--eval-every``."""
        return '--' + self.name.replace('_', '-')

    @property
    def default_text(self) -> str:
        """Return ``' (default X)'`` for --help; '' when unset (the description says what then)."""
        return '' if self.default is None else f' (default {self.default!r})'

    @property
    def help_text(self) -> str:
        """Return the flag's --help text: description, range, default (``%`` escaped)."""
        return (self.description + range_note(self.range_text()) +
                self.default_text).replace('%', '%%')

    @property
    def label(self) -> str:
        """Return how errors name the setting: ``'eval_every (--eval-every)'``."""
        return f'{self.name} ({self.flag})'

    def parse(self, value, strict: bool = False):
        """
        Return ``value`` converted and checked; ConfigError (a ValueError) naming the setting.

        ``value`` is a command-line string or a typed YAML/ROS value; ``strict`` (parameter
        files) accepts only values of the declared type, as ROS 2 does (``workers: "3"`` is
        not an integer there).
        """
        if value is None or self.means_none(value, strict) or (
                isinstance(value, str) and self.default is None and value.strip() in ('', 'none')
                and self.kind is not str):
            return None
        if self.kind is str and isinstance(value, (list, tuple, dict)):
            raise ConfigError(self._not_one_text(value))
        if strict and not _typed(self.kind, value):
            raise ConfigError(f'{self.label} must be {_KIND_TEXT[self.kind]}, got {value!r}')
        if self.kind is bool:
            if isinstance(value, str):
                low = value.strip().lower()
                if low not in ('true', 'false', '1', '0'):
                    raise ConfigError(f'{self.label}: {value!r} is not a bool')
                value = low in ('true', '1')
            return bool(value)
        try:
            if self.kind is int and isinstance(value, float) and not value.is_integer():
                raise ValueError
            out = self.kind(value.strip() if isinstance(value, str) else value)
        except (TypeError, ValueError):
            raise ConfigError(f'{self.label}: {value!r} is not '
                              f'{_KIND_TEXT[self.kind]}') from None
        self.check(out)
        return out

    def _not_one_text(self, value) -> str:
        """
        Say that a YAML list or mapping was given for this one-string setting, and how to write it.

        ROS 2 refuses a list for a string parameter as well; read as its Python text, the
        list reached the value check, which then called ``['hidden=64']`` not ``KEY=VALUE``.
        """
        what = 'a mapping' if isinstance(value, dict) else 'a list'
        line = f'{self.label}: {what} ({value!r}) where one string is expected'
        if self.joiner and not isinstance(value, dict):
            joined = self.joiner.join(str(v) for v in value)
            line += f'; write the items in one string: {joined!r}'
        return line + ' (ROS 2 refuses a list for it too)'

    def means_none(self, value, strict: bool = False) -> bool:
        """
        Tell whether ``value`` is the setting's ``none_text`` ("not set"), typed or as text.

        ``--lr 0`` on a command line is the text ``'0'``, as ``--lr 0.0`` or ``--lr 0e0`` are:
        each means what ``lr: 0.0`` means in a parameter file (the workload's own), not a
        learning rate of zero. ``strict`` (parameter files) compares typed values only: a
        quoted ``"0"`` there is a string, which ROS 2 refuses for a number.
        """
        if self.none_text is None:
            return False
        if isinstance(value, str) and not isinstance(self.none_text, str) and not strict:
            try:
                return self.kind(value.strip()) == self.none_text
            except (TypeError, ValueError):
                return False
        return value == self.none_text

    def check(self, value) -> None:
        """Raise ConfigError when ``value`` is outside the declared range or choices."""
        if value is None:
            return
        if self.choices and value not in self.choices:
            why = self.refusal(value) if self.refusal is not None else ''
            if why:
                raise ConfigError(f'{self.label} {value}: {why}')
            raise ConfigError(f'{self.label} must be one of {", ".join(self.choices)}, '
                              f'got {value!r}')
        if self.kind in (int, float):
            if isinstance(value, float) and not math.isfinite(value):
                raise ConfigError(f'{self.label} must be a finite number, got {value}')
            if self.low_open and value == self.low:     # (its vetting says why, if it can)
                why = self.vetting(value) if self.vetting is not None else ''
                if why:
                    raise ConfigError(f'{self.label} {_num(value)}: {why}')
            if (self.low is not None and value < self.low) or (
                    self.high is not None and value > self.high) or (
                    self.low_open and value == self.low):
                raise ConfigError(f'{self.label} must be in {self.range_text()}, '
                                  f'got {value!r}')
        why = self.vetting(value) if self.vetting is not None else ''
        if why:
            shown = _num(value) if self.kind in (int, float) else repr(value)
            raise ConfigError(f'{self.label} {shown}: {why}')

    def range_text(self) -> str:
        """Return the range as text: ``[1, inf)``, ``(0, inf)``, ``[0, 10]``, or ''."""
        return range_text(self.low, self.high, self.low_open)

    def ros_default(self):
        """Return the typed default for ROS parameters and launch arguments."""
        return self.none_text if self.default is None else self.default


_KIND_TEXT = {int: 'an integer', float: 'a number', str: 'a string', bool: 'true or false'}


def _typed(kind, value) -> bool:
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, kind)


def _num(value) -> str:
    """Return a bound as --help and errors write it: ``1`` for 1.0, ``1e-06``."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f'{value:g}'


def range_text(low=None, high=None, low_open: bool = False) -> str:
    """
    Return a numeric range as every --help writes it: ``[1, inf)``, ``(0, inf)``, ``[0, 10]``.

    One spelling for the settings' flags and the options ``rog fleet`` and ``rog robot`` add
    of their own (``--timeout``, ``--respawn``), so that a user reads each range alike; ''
    when unbounded. ``low_open``: ``low`` itself is refused (a wait of 0 s).
    """
    if low is None and high is None:
        return ''
    lo = '(-inf' if low is None else ('(' if low_open else '[') + _num(low)
    hi = 'inf)' if high is None else f'{_num(high)}]'
    return f'{lo}, {hi}'


def range_note(text: str) -> str:
    """Return ``' Range TEXT.'``, the sentence --help appends for a range ('' for none)."""
    return f' Range {text}.' if text else ''


SERVER_END_TIMEOUT_S = 2.0
"""End timeout of the fleets' engines (``ServerEngine`` and ``WorkerEngine``'s default, which no
setting changes): a worker waiting for its pull pokes every ``POKE_END_TIMEOUTS`` of them."""
POKE_INTERVAL_S = POKE_END_TIMEOUTS * SERVER_END_TIMEOUT_S
"""How often a worker that waits for its pull sends its poke, its only message meanwhile (s)."""
LEAST_ABSENCE_TIMEOUT_S = shortest_sound_absence_s(SERVER_END_TIMEOUT_S)
"""Shortest ``absence_timeout`` that a live, waiting worker outlasts: two poke intervals (16 s)."""


def _absence_refusal(value) -> str:
    """
    Say why an ``absence_timeout`` cannot work ('' when it can: 0, never, or two pokes or more).

    Why two pokes: a worker waiting for its pull sends nothing but a poke every
    ``POKE_INTERVAL_S``, so a shorter timeout suspends live robots and readmits them at their
    next poke, over and over (the server only warned, and every turn was an event in the log).
    """
    if not value or value >= LEAST_ABSENCE_TIMEOUT_S:
        return ''
    return (f'a worker waiting for its pull sends only a poke every {POKE_INTERVAL_S:g} s, so '
            f'a timeout below two of them ({LEAST_ABSENCE_TIMEOUT_S:g} s) suspends live robots '
            f'and readmits them over and over; give at least {LEAST_ABSENCE_TIMEOUT_S:g}, or 0 '
            'for never')


def _zero_wait_refusal(value) -> str:
    """
    Say why a wait of 0 s cannot work ('' for any other): it gives up at once, it is no 'never'.

    ``startup_timeout: 0`` failed every node of a fleet before its peers could be discovered
    (after starting them all); ``server_timeout: 0`` stopped a worker the first time it waited
    for a pull. Other settings read 0 as off (``absence_timeout``, ``diagnostics_hz``).
    """
    if value:
        return ''
    return ('0 gives up at once (before any peer can answer), it does not mean never; give '
            'the seconds to wait')


def _workload_options_refusal(value) -> str:
    """Say why a ``workload_options`` text cannot be read ('' when each pair is KEY=VALUE)."""
    from rog_ros.workloads.options import text_error
    return text_error(value)


def _s(name, typ, default, description, roles=ALL, group='fleet', **kw) -> Setting:
    return Setting(name, typ, default, description, roles, group, **kw)


SETTINGS = (
    # -------------------------------------------------- every node of one fleet must agree
    _s('workload', str, 'toy', 'Workload: toy, mpcol, eacol, or your own builder as '
       'package.module:function, which every node imports (docs/workloads.md).', TRAINING),
    _s('sync', str, 'rog', 'Synchronisation system: rog, ssp, bsp or flown (whole-model '
       'transfers in two server-granted slots, laggards first, then the robot netmon reports '
       'the fastest link for); the reference push systems adacomp, asgd, comp-asgd and gsp '
       '(docs/reference-systems.md); gsp+gds, adasgd and aet are refused (simulator only). '
       'rog:S, ssp:S and flown:S also set staleness to S, as in rog sim.',
       TRAINING, choices=FLEET_SYSTEMS, refusal=sim_only_reason),
    _s('staleness', int, 4, 'Staleness threshold S (iterations a worker may run ahead).',
       TRAINING, low=0, high=MAX_STALENESS),
    _s('workers', int, 3, 'Number of workers N in the fleet.', ALL, low=1, high=1024),
    _s('init_model', str, None, "Start from these weights instead of the workload's "
       "pre-trained checkpoint: a state_dict file or an earlier run's --out directory (its "
       'model.pt); give every node the same file (the server sends a robot that started '
       'from other weights its own model); empty = the checkpoint.',
       TRAINING, none_text=''),
    _s('workload_options', str, None, "Options of the workload's builder as KEY=VALUE pairs "
       'separated by semicolons, each value read as rog sim reads --workload-option (a '
       'number, true/false, text, or a comma-separated list such as hidden=512,256), e.g. '
       "data_dir=/data;hidden=128 (under ROS 2: workload_options:='data_dir=/data'); on a "
       'command line also --workload-option KEY=VALUE, repeatable; checked against the '
       'builder before anything starts; every node takes the same; empty = none.',
       TRAINING, none_text='', vetting=_workload_options_refusal, joiner=';'),
    _s('seed', int, 0, 'Seed of data order and generated traces.', ALL, low=0,
       high=MAX_SEED),
    _s('lr', float, None, "Learning rate; 0 = the workload's own.", TRAINING, low=0.0,
       none_text=0.0),
    _s('chunk_bytes', int, 16384, 'Row chunk payload cap in bytes (below 64 KiB: DDS '
       'fragments it on Wi-Fi).', TRAINING, low=256, high=65000),
    _s('window', int, 4, 'Unacknowledged chunks per transfer (at most 4 MiB of them: half '
       'of the DDS writer-history mark, past which a write to a robot whose link is down '
       'holds the sending node).', TRAINING, low=1, high=1024),
    _s('deadline_floor', float, DEFAULT_DEADLINE_FLOOR, 'rog: keep sending optional rows for '
       "at least this many compute times (0: the paper's MTA-time deadline).", TRAINING,
       low=0.0, high=10.0),
    _s('rtt_floor', float, DEFAULT_RTT_FLOOR, 'rog: ... and for at least this many measured '
       'round trips of the link (a transfer pays them whatever it carries).', TRAINING,
       low=0.0, high=100.0),
    _s('outage_aware', bool, True, 'rog: suspend a robot whose link holds the others for more '
       'than outage_bound fleet iteration times from the staleness check (outage-aware RSP; '
       "its late pushes are down-weighted); false = the paper's RSP.", TRAINING),
    _s('outage_bound', float, DEFAULT_OUTAGE_BOUND, 'rog: ... after this many fleet iteration '
       "times of stall (in the simulator, 2 reached EACOL's target sooner on a slow record "
       'but cost about a point of its final accuracy; docs/scheduling.md).', TRAINING,
       low=OUTAGE_BOUND_RANGE[0], high=OUTAGE_BOUND_RANGE[1]),
    _s('readmit_backoff', bool, True, 'rog: a robot suspended for its link again soon after '
       'its readmission stays out twice as long as the time before (a link that stays poor '
       'no longer holds the others once per readmission); false = readmitted as soon as its '
       'rows are fresh.', TRAINING),
    _s('straggler_slack', bool, True, 'rog: a robot whose slow (not dead) link holds the '
       'others a large share of their time gets extra staleness (up to 12 iterations) '
       'instead of a suspension: the others tolerate its rows that much staler and it pushes '
       'fewer rows per iteration (the server decides and tells the workers; none rises while '
       'a robot is suspended for its link). In the simulator it reached EACOL targets sooner '
       "on slow links (docs/scheduling.md); false = the paper's one bound for every robot.",
       TRAINING),
    _s('async_when_out', bool, False, 'rog: a robot suspended for its link trains at its '
       "link's pace, not held to the staleness bound itself: its pulls and pushes carry what "
       'ATP sends instead of the whole model after each catch-up, so its gradients arrive '
       "more often (weighted by their staleness); it returns once its link keeps the fleet's "
       'pace. Helps a fleet with chronically slow robots, costs accuracy where several stay '
       'out long (docs/scheduling.md). The server decides and tells the robot on its pulls. '
       'false = it catches up whole.', TRAINING),
    _s('free_stragglers', bool, FREE_STRAGGLERS_DEFAULT, 'rog: a robot whose link is too '
       "slow to keep the fleet's pace even at the largest straggler slack (it would hold the "
       'others at its pace whatever the bound) is suspended for its link and trains at its '
       'own pace; it returns once its link could keep the pace. The server decides and tells '
       'the robot on its pulls (docs/scheduling.md, "A link too slow for any slack"). '
       'false = it stays in the check with its slack.', TRAINING),
    _s('late_rows', bool, True, 'rog: send the rows a push withheld while the robot computes '
       "its next gradient (its link is idle then); false = the paper's ATP.", TRAINING),
    _s('late_pulls', bool, True, 'rog: the server sends a computing robot the rows changed '
       'since its pull, after its late push (applied when the computation ends); false = '
       'every row waits for the next pull.', TRAINING),
    _s('namespace', str, DEFAULT_NAMESPACE, 'Fleet namespace: every topic is relative to it.'),
    _s('bus', str, 'auto', 'Transport: rclpy when ROS 2 is sourced, else the embedded DDS '
       '(none: netmon only measures).', NODES, choices=('auto', 'dds', 'rclpy', 'none')),
    _s('startup_timeout', float, 60.0, 'Seconds to wait for the peers to appear.', TRAINING,
       low=0.0, low_open=True, vetting=_zero_wait_refusal),
    _s('record', str, None, 'Write status, link, schedule and diagnostics topics to this '
       'ROS 2 MCAP file; empty = no recording. An earlier recording there is kept: moved '
       'to the first free numbered name (run.mcap -> run.1.mcap, run.2.mcap, ...).', ALL,
       none_text=''),
    _s('fleet_key_file', str, None, 'Fleet key file (mode 0600) that signs and verifies every '
       'message; empty = $ROG_FLEET_KEY_FILE, else $ROG_FLEET_KEY, else none '
       '(unauthenticated; rog fleet writes a new key to OUT/fleet.key instead).', ALL,
       none_text=''),
    _s('robot_keys', bool, False, "Tag each robot's messages, and the server's to it, with a "
       "key of that robot's own derived from the fleet key, so that a robot can speak only "
       'for itself; the server holds the fleet key, each robot its robot key file (rog '
       'security key --robot R --fleet-key FLEET_KEY FILE) or, on one machine, the fleet key '
       '(docs/security.md). Every node must agree.', ALL),
    _s('diagnostics_hz', float, 1.0, 'Rate of /diagnostics (DiagnosticArray); 0 = off.',
       ALL, low=0.0, high=100.0),
    _s('autostart', bool, True, 'Configure and activate at start; false: wait for SIGUSR2 '
       '(configures if need be, then activates) or, under ROS 2, ros2 lifecycle set '
       '/rog/rog_server configure (fully qualified node names: workers are '
       '/rog/rog_worker_K), then activate.',
       (SERVER, WORKER),
       'lifecycle'),
    # -------------------------------------------------- emulated links
    _s('trace', str, 'none', 'Emulated bandwidth trace per worker link: a preset (indoors, '
       'outdoors, ...), a file (CSV t_seconds,mbps, or a table whose header names the time '
       'and rate columns and units such as time_ms,throughput_kbps; "t bw" lines; the '
       'bw_replay-<rank>.txt logs of the Rog testbed; a Mahimahi packet-delivery trace; an iperf3 '
       '-J report or iperf text output; an HSDPA or 4G/LTE drive log; a G-NetTrack Pro or '
       'Lumos5G CSV; an interface byte counter such as time,rx_bytes; a sar -n DEV report; '
       "any of them gzip-compressed; a ROS 2 bag of netmon's LinkStats, worker r following "
       "the bag's robot of rank r, BAG#NAME one robot of it, BAG#emulated its emulated_mbps), "
       'a comma-separated list of them (worker r follows entry r '
       'mod k: each robot its own recorded link), or none (real links, no shaping).', ALL,
       'link', joiner=','),
    _s('trace_scale', float, 1.0, 'Multiply the trace rates.', ALL, 'link', low=1e-6,
       high=MAX_TRACE_SCALE),
    _s('epoch', float, None, 'Wall-clock time (time.time()) at which every trace starts; '
       '0 = node start.', NODES, 'link', low=0.0, high=MAX_EPOCH, none_text=0.0),
    _s('burst_bytes', int, 65536, 'Token bucket size of the emulated link.', TRAINING,
       'link', low=1),
    # -------------------------------------------------- rog_server
    _s('iterations', int, 100, 'Stop the fleet once every worker pushed this many.',
       (SERVER, FLEET), 'server', low=1, high=MAX_FLEET_ITERATIONS),
    _s('eval_every', int, 10, 'Evaluate the consensus model every K iterations.',
       (SERVER, FLEET), 'server', low=1, high=MAX_FLEET_ITERATIONS),
    _s('out', str, 'rog_run', 'Directory for summary.json, timeseries.csv, events.csv and '
       'the trained model.pt (rog fleet: default rog_fleet_run).',
       (SERVER, FLEET), 'server'),
    _s('checkpoint_every', int, 10, 'With state_dir: checkpoint the server every K '
       "iterations (atomic; workers keep what came after it); a push system's server every K "
       'pushes answered (each push journaled before its answer leaves: a crash loses none; '
       'K bounds the journal replayed at a restart).', (SERVER, FLEET), 'server',
       low=1, high=MAX_FLEET_ITERATIONS),
    _s('absence_timeout', float, None, 'Suspend a worker from the staleness rules after this '
       'many seconds without a message from it (s); 0 = never; else at least '
       f'{LEAST_ABSENCE_TIMEOUT_S:g} (two pokes of a waiting worker).', (SERVER, FLEET),
       'server', low=0.0, none_text=0.0, vetting=_absence_refusal),
    _s('min_workers', int, 1, 'Quorum: serve pulls only while at least this many workers are '
       'active.', (SERVER, FLEET), 'server', low=1, high=1024),
    _s('final_model', bool, True, "When training ends, send every robot the fleet's final "
       'model (the consensus, lossless) before its stop order, so that each robot leaves '
       'holding the trained model, the one in model.pt (rog, ssp, bsp, flown; robots done '
       'early wait for the others; a robot silent for 60 s then is stopped without it); '
       'false = each robot stops at its last pull with its own model.',
       (SERVER, FLEET), 'server'),
    _s('state_dir', str, None, "Directory of this node's durable state (server checkpoint, "
       'worker state), restored on start; empty = nothing is saved.', (SERVER, WORKER, FLEET),
       'durable', none_text=''),
    # -------------------------------------------------- rog_worker
    _s('rank', int, 0, 'This worker, 0..N-1.', (WORKER,), 'worker', low=0, high=1023),
    _s('server_timeout', float, 120.0, 'Give up after this long without a message from '
       'the server (s).', (WORKER,), 'worker', low=0.0, low_open=True,
       vetting=_zero_wait_refusal),
    _s('model_out', str, None, "Write this robot's model here when training ends: a "
       "state_dict file like the server's model.pt (the fleet's final model unless the "
       'server runs with final_model false); empty = not written (rog robot --role worker '
       'writes rog_robot_model.pt).', (WORKER,), 'worker', none_text=''),
    _s('device', str, 'auto', 'Where workers compute gradients: auto (the GPU if torch sees '
       'one, as on a Jetson with the NVIDIA torch wheel; else the CPU), cpu, cuda or cuda:N.',
       (WORKER, FLEET), 'worker'),
    # -------------------------------------------------- netmon
    _s('interface', str, 'auto', 'Interface to monitor (auto: Wi-Fi, else the busiest).',
       (NETMON,), 'netmon'),
    _s('nodes', str, None, 'Comma-separated worker ranks to report for (-1: this robot); '
       'empty = every worker in a fleet on one machine (rog fleet, fleet.launch.py), this '
       'robot (-1) for a netmon started alone.', (NETMON,), 'netmon', none_text='',
       joiner=','),
    _s('rate_hz', float, 10.0, 'LinkStats samples per second.', (NETMON,), 'netmon',
       low=0.01, high=1000.0),
    _s('record_trace', str, None, 'Write a bandwidth trace CSV here on exit (its folder is '
       'checked at start; the log gives its mean, median and share of time at 0); '
       'empty = none.', (NETMON,), 'netmon', none_text=''),
    _s('record_source', str, 'throughput', 'What the recorded trace holds: throughput (the '
       'traffic this robot moves, not the link capacity: load the link, e.g. with iperf3, '
       'while recording, or an idle link records as an outage), bitrate (the Wi-Fi PHY rate '
       'from iw; needs iw and a Wi-Fi interface) or emulated (the rate --trace enforces; '
       'needs --trace).', (NETMON,),
       'netmon', choices=('throughput', 'bitrate', 'emulated')),
    _s('duration', float, None, 'Exit after this many seconds; 0 = run until stopped.',
       (NETMON,), 'netmon', low=0.0, none_text=0.0),
    _s('netmon', bool, True, 'Start netmon with the fleet or robot (off: rog fleet --no-netmon, '
       'rog robot --netmon false, or netmon: false in the parameter file).', (FLEET,),
       'fleet only'),
)
"""Every setting, in the order the documentation lists them."""

BY_NAME = {s.name: s for s in SETTINGS}


def for_role(role: str) -> list:
    """Return the settings that ``role`` (an executable or 'fleet') accepts."""
    return [s for s in SETTINGS if role in s.roles]


def defaults(role: str = None) -> dict:
    """Return ``{name: default}`` of every setting (of ``role``'s when given)."""
    return {s.name: s.default for s in (for_role(role) if role else SETTINGS)}


def split_sync_spec(params: dict, where: str = '') -> dict:
    """
    Return ``params`` with a ``sync`` written ``name:S`` as ``sync: name`` and ``staleness: S``.

    ``rog sim``, ``rog compare`` and the README write a system with its threshold, ``rog:4``;
    a node keeps the threshold in a setting of its own. The spec is read as ``rog sim`` reads
    it (``make_policy``: ``rog: 04`` is rog:4, ``bsp:0`` is bsp, ``rog:`` is refused), one
    source of parameters at a time (``params``: a file's section, the flags, the ``-p``
    values), so that the later source wins as for any setting. A ConfigError (one line,
    prefixed with ``where``) when that same source gives another staleness, when S is given
    for a system without a threshold, or for a ``#tag`` (a simulator option).
    """
    value = params.get('sync')
    if not isinstance(value, str) or (':' not in value and '#' not in value):
        return params
    sync = BY_NAME['sync']
    prefix = f'{where}: ' if where else ''
    if '#' in value:
        raise ConfigError(f'{prefix}{sync.label} {value}: #tags are rog sim and rog compare '
                          'options; a fleet takes each as a parameter of its own')
    name = value.partition(':')[0].strip().lower()
    if sim_only_reason(name):
        raise ConfigError(f'{prefix}{sync.label} {value}: {sim_only_reason(name)}')
    if name in PUSH_SYSTEMS:
        raise ConfigError(f'{prefix}{sync.label} {value}: {name} has no staleness threshold S '
                          f'in a fleet; write {name} alone')
    if name not in ROG_SYSTEMS:
        return params                   # the choices check names the systems a fleet runs
    from rog_ros.protocol.policies import make_policy
    try:
        threshold = make_policy(value).staleness
    except ValueError as err:
        raise ConfigError(f'{prefix}{sync.label}: {err}') from None
    out = dict(params, sync=name)
    if name == 'bsp':                   # bsp:0, as rog sim reads it: bsp (no threshold)
        return out
    staleness = BY_NAME['staleness']
    if threshold > staleness.high:
        raise ConfigError(f'{prefix}{sync.label} {value}: the staleness threshold S must be in '
                          f'{staleness.range_text()}, got {threshold}')
    given = params.get('staleness')
    if given is not None and staleness.parse(given) != threshold:
        dash = '' if where else '--'          # flags as typed; a file's keys, -p names bare
        raise ConfigError(f'{prefix}{dash}staleness {given} conflicts with the threshold in '
                          f'{dash}sync {value}; give the threshold once ({dash}sync {name}:S, '
                          f'or {dash}sync {name} {dash}staleness S)')
    out['staleness'] = threshold
    return out


# ---------------------------------------------------------------------- argparse
GROUP_TITLES = {'fleet': 'Fleet settings (identical on every node)',
                'link': 'Link emulation (off unless `trace` is given)',
                'lifecycle': 'Lifecycle (`rog_server`, `rog_worker`)',
                'durable': 'Durable state (`rog_server`, `rog_worker`)',
                'server': '`rog_server`', 'worker': '`rog_worker`', 'netmon': '`netmon`',
                'fleet only': '`rog fleet` and `rog robot` only'}


WORKLOAD_OPTION_FLAG = '--workload-option'
"""A second flag of ``workload_options``: one ``KEY=VALUE`` pair, repeatable (as in rog sim)."""


class JoinedPairs(argparse.Action):
    """
    Store ``--workload-options TEXT``; each ``--workload-option KEY=VALUE`` adds a pair to it.

    Both flags write the one setting ``workload_options``, its pairs joined with ``;`` in the
    order given (a key given twice is refused when the text is read, as rog sim refuses it).
    """

    def __call__(self, parser, namespace, values, option_string=None):
        """Join ``values`` to the pairs given before it on the command line."""
        before = getattr(namespace, self.dest, None)
        pairs = [before] if isinstance(before, str) and before.strip() else []
        setattr(namespace, self.dest, ';'.join(pairs + [values]))


def add_workload_options(parser, default, help_text: str) -> None:
    """
    Add ``--workload-options TEXT`` and ``--workload-option KEY=VALUE`` (repeatable).

    Both are registered by their full names: argparse would otherwise read
    ``--workload-option`` as an abbreviation of ``--workload-options`` (one pair replacing,
    not joining, another). ``default``: argparse.SUPPRESS in the nodes' parsers.
    """
    name = BY_NAME['workload_options'].name
    parser.add_argument(BY_NAME['workload_options'].flag, action=JoinedPairs, dest=name,
                        default=default, metavar='TEXT', help=help_text)
    parser.add_argument(WORKLOAD_OPTION_FLAG, action=JoinedPairs, dest=name, default=default,
                        metavar='KEY=VALUE', help='one pair of --workload-options, repeatable '
                        '(the spelling of rog sim): --workload-option data_dir=/data '
                        '--workload-option hidden=512,256')


def add_arguments(parser: argparse.ArgumentParser, role: str, suppress: bool = True) -> None:
    """
    Add one flag per setting of ``role``, grouped; help text and range from the declaration.

    With ``suppress`` the parsed namespace holds only flags that were given (so
    :func:`resolve` can merge them above the params file).
    """
    groups = {}
    for s in for_role(role):
        title = GROUP_TITLES.get(s.group, f'{s.group} options')
        g = groups.get(title) or groups.setdefault(title, parser.add_argument_group(title))
        default = argparse.SUPPRESS if suppress else s.default
        text = s.help_text
        kw = {'default': default, 'help': text, 'dest': s.name}
        if s.name == 'workload_options':
            add_workload_options(g, default, text)
        elif s.kind is bool:
            g.add_argument(s.flag, type=s.parse, metavar='{true,false}', **kw)
        else:
            g.add_argument(s.flag, type=str, metavar=s.kind.__name__.upper(), **kw)


# ---------------------------------------------------------------------- ROS arguments
def split_ros_args(argv) -> tuple:
    """
    Split ``argv`` into (plain arguments, ros arguments) at ``--ros-args ... [--]`` blocks.

    Returns ``(plain, ros)`` where ``ros`` is a dict: ``params`` (list of (name, text) from
    ``-p``/``--param``), ``params_files`` (paths), ``remaps`` (the ``-r __node:=`` /
    ``-r __ns:=`` rules, :func:`rog_ros.nodes.ros_names.parse_rule`). Unknown ROS options and
    topic remaps are kept for rclpy and ignored here.
    """
    plain, ros = [], {'params': [], 'params_files': [], 'remaps': []}
    args, i, inside = list(argv), 0, False
    while i < len(args):
        a = args[i]
        if a == '--ros-args':
            inside = True
        elif inside and a == '--':
            inside = False
        elif not inside:
            plain.append(a)
        elif a in ('-p', '--param', '--params-file', '-r', '--remap') and i + 1 < len(args):
            i += 1
            value = args[i]
            if a == '--params-file':
                ros['params_files'].append(value)
            elif a in ('-r', '--remap'):
                rule = ros_names.parse_rule(value)
                if rule is not None:
                    ros['remaps'].append(rule)
            elif ':=' not in value:
                raise ValueError(f'--ros-args {a} {value!r}: expected name:=value')
            else:
                ros['params'].append(tuple(value.split(':=', 1)))
        i += 1
    return plain, ros


def _yaml_value(text: str):
    """Parse a ``-p`` value as ROS does (a YAML scalar)."""
    import yaml
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def file_sections(doc: dict, where: str = 'parameter file') -> dict:
    """Return ``{section: {key: value}}`` of a parsed ROS 2 parameter file; ValueError."""
    out = {}
    for node, body in (doc or {}).items():
        if not isinstance(node, str):
            raise ValueError(f'{where}: section {node!r} is not a node name (/**, rog_server, '
                             'rog_worker, netmon or a node such as rog_worker_2)')
        if not isinstance(body, dict) or 'ros__parameters' not in body:
            raise ValueError(f'{where}: {node!r} needs a ros__parameters mapping')
        params = body['ros__parameters'] or {}
        if not isinstance(params, dict):
            raise ValueError(f'{where}: {node}.ros__parameters must be a mapping')
        out[node if node == ALL_NODES else node.lstrip('/')] = dict(params)
    return out


def load_yaml_document(fh):
    """
    Parse a parameter file as ``yaml.safe_load`` does, refusing a key given twice.

    PyYAML keeps the last of two equal keys without a word (``workers: 3`` then ``workers:
    5`` in one section ran a fleet of 5); a ``yaml.YAMLError`` with the key's line instead.
    """
    import yaml

    class _Loader(yaml.SafeLoader):
        pass

    def mapping(loader, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f'{key!r} is given twice in one section', key_node.start_mark)
            seen.add(key)
        return loader.construct_mapping(node, deep)

    _Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return yaml.load(fh, Loader=_Loader)


def unreadable(label: str, path, err: OSError) -> ConfigError:
    """
    Return the one-line error for a file that could not be opened, in words.

    ``str(err)`` reads ``[Errno 2] No such file or directory: '/tmp/nope.yaml'``: Python's
    text, with a number the user has no use for and the path said twice.
    """
    why = {errno.ENOENT: 'no such file', errno.EISDIR: 'a directory, not a file',
           errno.EACCES: 'no permission to read it'}.get(err.errno)
    if why is None:
        text = err.strerror or type(err).__name__
        why = 'cannot be read (' + text[:1].lower() + text[1:] + ')'
    return ConfigError(f'{label} {path}: {why}')


def open_parameter_file(path, label: str = 'parameter file'):
    """Open a parameter file for reading; ConfigError (:func:`unreadable`) if it cannot be."""
    try:
        return open(path, encoding='utf-8')
    except OSError as err:
        raise unreadable(label, path, err) from None


def read_parameter_file(path) -> dict:
    """Read a ROS 2 parameter file; return :func:`file_sections` of it."""
    import yaml
    with open_parameter_file(path, '--params-file') as fh:
        try:
            doc = load_yaml_document(fh)
        except yaml.YAMLError as err:
            mark = getattr(err, 'problem_mark', None)
            where = f' line {mark.line + 1}' if mark is not None else ''
            raise ValueError(f'parameter file {path}{where}: not valid YAML '
                             f'({getattr(err, "problem", None) or "syntax"})') from None
        except UnicodeDecodeError:
            raise ValueError(f'parameter file {path}: not a text file in UTF-8') from None
    if doc is not None and not isinstance(doc, dict):
        raise ValueError(f'parameter file {path}: expected a mapping of node names')
    return file_sections(doc, str(path))


def section_values(sections: dict, executable: str, node_name: str, fqn=None) -> dict:
    """
    Merge the sections that apply to a node: ``/**``, globs, executable, name, then namespaced.

    A section with a namespace (``/robot1/rog_server``, ``/**/netmon_*``; stored without the
    leading ``/``) applies to the node whose fully qualified name ``fqn`` it matches, as rcl
    matches it (``*`` one name, ``**`` any number of them); one without (``rog_server``,
    ``rog_worker_*``) to the node of that name in any namespace.
    """
    out = dict(sections.get(ALL_NODES, {}))
    for key in sorted(sections):
        if key != ALL_NODES and '/' not in key and key not in (node_name, executable) and (
                fnmatch.fnmatchcase(node_name, key)):
            out.update(sections[key])
    out.update(sections.get(executable, {}))
    if node_name != executable:
        out.update(sections.get(node_name, {}))
    for key in sorted(sections):
        if key != ALL_NODES and '/' in key and fqn is not None and _fqn_match(key, fqn):
            out.update(sections[key])
    return out


def _fqn_match(key: str, fqn: str) -> bool:
    """Tell whether section ``key`` (no leading ``/``) names node ``fqn`` (rcl's wildcards)."""
    parts = ['(/[^/]+)*' if t == '**' else '/' + re.escape(t).replace(r'\*', '[^/]*')
             for t in key.split('/')]
    return re.fullmatch(''.join(parts), fqn) is not None


RCLPY_OWN_PARAMETERS = ('use_sim_time', 'start_type_description_service')
"""Parameters every rclpy node declares itself: a ROS 2 parameter file may set them for
``/**``; the nodes read none of them (they keep wall-clock time, see rclpy_parameter)."""


def rclpy_parameter(key: str, value, where: str, text: bool = False) -> bool:
    """
    Tell whether ``key`` is one of rclpy's own parameters (to be left alone); refuse sim time.

    ``use_sim_time: true`` would be ignored, and a node on a replayed ``/clock`` would still
    time its transfers, timeouts and link estimates in wall-clock seconds: a ValueError. A
    file's value must be the boolean itself (rclpy refuses a quoted ``"false"`` for its bool
    parameter); ``text`` values (``-p use_sim_time:=false``) are read as YAML, as ROS does.
    """
    if key not in RCLPY_OWN_PARAMETERS:
        return False
    flag = _yaml_value(value) if text and isinstance(value, str) else value
    if key == 'use_sim_time' and flag is not False:
        raise ValueError(f'{where}: use_sim_time {value!r}: rog_ros nodes keep wall-clock time '
                         '(their transfers, timeouts and link estimates are real seconds); '
                         'remove it or set it to false')
    return True


def check_parameter_file(sections: dict, where: str = 'parameter file') -> None:
    """Raise ValueError naming any key no setting declares, or a value out of range."""
    for section, params in sections.items():
        for key, value in split_sync_spec(params, f'{where} {section}').items():
            if rclpy_parameter(key, value, where):
                continue
            if key not in BY_NAME:
                raise ValueError(f'{where}: unknown parameter {key!r} in {section}; known: '
                                 f'{", ".join(sorted(BY_NAME))}')
            BY_NAME[key].parse(value)


def node_name(role: str, values: dict) -> str:
    """Return the unique node name: rog_server, rog_worker_<rank>, netmon_<rank>."""
    if role == WORKER:
        return f'rog_worker_{values.get("rank", 0)}'
    if role == NETMON:
        nodes = values.get('nodes')
        first = str(nodes).split(',')[0].strip() if nodes not in (None, '') else ''
        return f'netmon_{first}' if first and first != '-1' and ',' not in str(nodes) \
            else 'netmon'
    return role


def resolve(role: str, parsed: argparse.Namespace, ros: dict) -> argparse.Namespace:
    """
    Merge defaults < params files < flags < ``-p`` for ``role``; validate; a Namespace.

    Raises ValueError with a one-line message (unknown ``-p`` name, bad value, bad file).
    """
    accepted = {s.name for s in for_role(role)}
    values = defaults(role)
    flags = {k: v for k, v in vars(parsed).items() if k in accepted}
    provisional = dict(values, **{k: v for k, v in flags.items() if k == 'rank'})
    for name, text in ros['params']:
        if name == 'rank':
            provisional['rank'] = text
    name = ros_names.node_name(ros.get('remaps', ()), node_name(role, provisional))
    files = []
    for path in ros['params_files']:
        sections = {section: split_sync_spec(params, f'{path} {section}')
                    for section, params in read_parameter_file(path).items()}
        check_parameter_file(sections, path)
        files.append(sections)
    # the node's namespace, which namespaced sections match: -r __ns:=, else the fleet
    # namespace of -p, the flags or the files' other sections (/**, the executable, the name)
    file_ns = [section_values(sections, role, name).get('namespace') for sections in files]
    given_ns = ([t for k, t in ros['params'] if k == 'namespace'] or
                [flags.get('namespace') or ([n for n in file_ns if n] or [None])[-1] or
                 values.get('namespace') or DEFAULT_NAMESPACE])[-1]
    fqn = ros_names.qualified(ros_names.node_namespace(ros.get('remaps', ()), name, given_ns),
                              name)
    for sections in files:
        for key, value in section_values(sections, role, name, fqn).items():
            if key in accepted:
                values[key] = BY_NAME[key].parse(value)
    for key, text in split_sync_spec(flags).items():
        values[key] = BY_NAME[key].parse(text)
    given = {}                  # -p values, in order (a later one wins)
    for key, text in ros['params']:
        if rclpy_parameter(key, text, '-p', text=True):
            continue
        if key not in accepted:
            raise ValueError(f'-p {key}: {role} has no parameter {key!r}; known: '
                             f'{", ".join(sorted(accepted))}')
        given[key] = _yaml_value(text) if isinstance(text, str) else text
    for key, value in split_sync_spec(given, '-p').items():
        values[key] = BY_NAME[key].parse(value)
    out = argparse.Namespace(**{k: v for k, v in vars(parsed).items() if k not in accepted})
    for key, value in values.items():
        setattr(out, key, value)
    # the graph: -r __node:= / __ns:= as rcl applies them (the topics stay the fleet's)
    out.status_name = node_name(role, values)
    out.node_name = ros_names.node_name(ros.get('remaps', ()), out.status_name)
    out.node_namespace = ros_names.node_namespace(ros.get('remaps', ()), out.node_name,
                                                  values.get('namespace', DEFAULT_NAMESPACE))
    out.namespace_note = namespace_note(out.node_namespace, out.node_name,
                                        values.get('namespace', DEFAULT_NAMESPACE),
                                        os.environ.get(FLEET_PLACED_ENV))
    return out


FLEET_PLACED_ENV = 'ROG_FLEET_NODE_NAMESPACE'
"""Set by ``rog fleet`` in its nodes' environment: the ``-r __ns:=`` it gave them
(``/rog/<--out folder>``); it keeps its runs apart by their domain and fleet key."""


def namespace_note(node_namespace: str, node_name: str, fleet_namespace: str,
                   placed: str = None) -> str | None:
    """
    Return the warning for a node a ROS namespace moved while its fleet's topics did not.

    ``-r __ns:=`` (a launch file's ``PushRosNamespace``) moves the node in the ROS graph only;
    before 2026-12-06 it also moved the fleet's topics, so two fleets launched under two ROS
    namespaces were two fleets. Now they share the default fleet namespace's topics and train
    as one unless each gets its own ``namespace``: said once at start (None: nothing to say,
    the node is in its fleet namespace, or where ``rog fleet`` placed it (``placed``:
    ``/rog/<--out folder>``, :data:`FLEET_PLACED_ENV`), or the fleet
    namespace was set to something of its own). Only that namespace: a launch file's
    ``PushRosNamespace('/rog/lab1')`` beside ``'/rog/lab2'`` is below ``/rog`` as well, and
    the two are one fleet.
    """
    if fleet_namespace != DEFAULT_NAMESPACE or node_namespace in (fleet_namespace, placed):
        return None
    return (f'-r __ns:={node_namespace} places this node at '
            f'{ros_names.qualified(node_namespace, node_name)} in the ROS graph; its topics stay '
            f'under the fleet namespace {fleet_namespace}, so nodes started under other ROS '
            f'namespaces on this domain are the same fleet: to keep this fleet apart, give '
            f'all its nodes -p namespace:={node_namespace}')


class SettingsParser(argparse.ArgumentParser):
    """
    An ArgumentParser whose ``parse_args`` resolves a node's settings completely.

    It accepts the flags of ``role``'s settings (added by :func:`add_arguments`) and
    ``--ros-args`` blocks, merges them as :func:`resolve` does and validates every value, so
    a bad value is a usage error (exit 2) with a one-line message. So is a ``record`` path
    the node could not open (a missing folder, a directory), as ``rog fleet --record`` says.
    Flags are taken in full only (``allow_abbrev`` off): a launch file's ``--iter`` that
    argparse completes today would mean nothing, or another flag, once a flag shares it.
    """

    def __init__(self, role: str, **kwargs):
        kwargs.setdefault('allow_abbrev', False)
        super().__init__(**kwargs)
        self.role = role
        add_arguments(self, role)

    def parse_args(self, args=None, namespace=None):
        argv = sys.argv[1:] if args is None else list(args)
        try:
            plain, ros = split_ros_args(argv)
        except ValueError as err:
            self.error(str(err))
        parsed = super().parse_args(plain, namespace)
        try:
            out = resolve(self.role, parsed, ros)
            if getattr(out, 'record', None):    # opened at start: a bad path, one line first
                output_file('--record', out.record, in_place=True)
            return out
        except (OSError, ValueError) as err:
            self.error(str(err))


# ---------------------------------------------------------------------- ROS 2 parameters
def parameter_descriptor(s: Setting):
    """Return the rcl_interfaces ParameterDescriptor of a setting (needs ROS 2)."""
    from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, \
        ParameterType
    types = {int: ParameterType.PARAMETER_INTEGER, float: ParameterType.PARAMETER_DOUBLE,
             str: ParameterType.PARAMETER_STRING, bool: ParameterType.PARAMETER_BOOL}
    desc = ParameterDescriptor(name=s.name, type=types[s.kind], description=s.description,
                               read_only=s.name not in RUNTIME_SETTABLE)
    if s.choices:
        desc.additional_constraints = 'one of: ' + ', '.join(s.choices)
    if s.kind is int and (s.low is not None or s.high is not None):
        desc.integer_range = [IntegerRange(
            from_value=int(s.low if s.low is not None else -2 ** 63),
            to_value=int(s.high if s.high is not None else 2 ** 63 - 1), step=0)]
    elif s.kind is float and (s.low is not None or s.high is not None):
        desc.floating_point_range = [FloatingPointRange(
            from_value=float(s.low if s.low is not None else -1e308),
            to_value=float(s.high if s.high is not None else 1e308), step=0.0)]
    return desc


RUNTIME_SETTABLE = ('diagnostics_hz',)
"""Settings that may change while a node runs (``ros2 param set``); the others are read-only."""


def declare_ros_parameters(node, role: str, values) -> None:
    """
    Declare every setting of ``role`` on an rclpy ``node`` with its descriptor.

    The declared value is the resolved one (``values``: the Namespace of
    :func:`parse_node_args`, which already applied ``--ros-args -p`` and ``--params-file``
    with this package's precedence), declared with ``ignore_override=True``: rclpy would
    otherwise replace it with its own reading of those arguments (a different value when a
    flag wins over a parameter file) and raise InvalidParameterTypeException at start when
    an override's type differs from the setting's (``-p lr:=1`` for a float). So
    ``ros2 param get`` shows what the node runs with.
    """
    for s in for_role(role):
        value = getattr(values, s.name, s.default)
        declared = (s.name, s.ros_default() if value is None else value, parameter_descriptor(s))
        try:
            node.declare_parameter(*declared, ignore_override=True)
        except TypeError as err:       # an rclpy without ignore_override (Dashing)
            if 'ignore_override' not in str(err):
                raise
            node.declare_parameter(*declared)


# ---------------------------------------------------------------------- launch arguments
def launch_arguments(roles=NODES) -> dict:
    """Return ``{name: description}``: one launch argument per setting of ``roles``."""
    out = {}
    for s in SETTINGS:
        if any(r in s.roles for r in roles):
            out[s.name] = (s.description + ' Empty: from the config file, else '
                           f'{s.default!r}.')
    return out


def launch_overrides(values: dict, roles=NODES) -> dict:
    """Parse launch-argument strings (empty = not given); ValueError names a bad one."""
    known = launch_arguments(roles)
    given = {}
    for key, text in values.items():
        if text is None or str(text).strip() == '' or key not in BY_NAME:
            continue
        if key not in known:
            raise ValueError(f'unknown launch argument {key!r}')
        given[key] = str(text)
    return {key: BY_NAME[key].parse(text)
            for key, text in split_sync_spec(given, 'launch arguments').items()}


# ---------------------------------------------------------------------- documentation
BEGIN_MARK = '<!-- BEGIN GENERATED: node parameters -->'
END_MARK = '<!-- END GENERATED: node parameters -->'


def configuration_reference() -> str:
    """Return the generated part of docs/configuration.md (between its markers)."""
    lines = [
        '<!-- Generated from rog_ros/nodes/settings.py (SETTINGS); do not edit here.',
        '     Regenerate: python -m rog_ros.nodes.settings docs/configuration.md -->', '',
        'Precedence, later wins: default < parameter file (sections `/**`, the executable',
        'such as `rog_worker`, then the node name such as `rog_worker_2`, then a fully',
        'qualified one such as `/robot2/rog_worker_2`; `*` and `**` globs allowed, as rcl) <',
        'command-line flag < `-p`. `rog fleet --config`, `rog robot --config` and the launch',
        "files' `config:=` take the `/**` and executable sections and refuse any other (a",
        "section for one node: that robot's own flags or file); node-name and glob sections",
        'apply to nodes started with `--ros-args --params-file`. Node names are unique:',
        '`rog_server`, `rog_worker_<rank>`, `netmon_<rank>`, in the fleet namespace',
        '(`/rog/rog_server`) unless `--ros-args -r __ns:=` moves them (docs/architecture.md,',
        '"Node names and namespaces"). A "not set" value is written as',
        'the stand-in in the table (`lr: 0.0`',
        "means the workload's learning rate). Ranges are in the ROS 2 parameter descriptors",
        '(`ros2 param describe`); only `diagnostics_hz` may change at run time.', '']
    by_group = {}
    for s in SETTINGS:
        by_group.setdefault(s.group, []).append(s)
    for group, items in by_group.items():
        lines += [f'### {GROUP_TITLES.get(group, group)}', '',
                  '| name | type | default | range | nodes | description |',
                  '|---|---|---|---|---|---|']
        for s in items:
            default = 'not set' + (f' (`{s.none_text!r}`)' if s.none_text is not None else '') \
                if s.default is None else f'`{s.default!r}`'
            rng = s.range_text() or (', '.join(s.choices) if s.choices else '')
            roles = ', '.join(r for r in s.roles)
            lines.append(f'| `{s.name}` | {s.kind.__name__} | {default} | {rng} | {roles} | '
                         f'{s.description} |')
        lines.append('')
    return '\n'.join(lines)


def generated_section(text: str) -> str:
    """Return what lies between the markers of a configuration.md text (ValueError if none)."""
    try:
        start = text.index(BEGIN_MARK) + len(BEGIN_MARK)
        return text[start:text.index(END_MARK, start)].strip('\n')
    except ValueError:
        raise ValueError(f'configuration reference lacks the {BEGIN_MARK} / {END_MARK} '
                         'markers') from None


def update_reference(path: str) -> bool:
    """Rewrite the generated section of ``path``; tell whether it changed."""
    with open(path, encoding='utf-8') as fh:
        text = fh.read()
        mode = stat.S_IMODE(os.fstat(fh.fileno()).st_mode)
    old = generated_section(text)
    new = configuration_reference().strip('\n')
    if old == new:
        return False
    start = text.index(BEGIN_MARK) + len(BEGIN_MARK)
    end = text.index(END_MARK, start)
    from rog_ros.atomic import atomic_write_text     # (whole or not at all)
    # (through a symbolic link, as open(path, 'w') wrote: the link itself stays; with the
    # file's own mode, as open(path, 'w') kept it, not the umask's for a new file)
    atomic_write_text(os.path.realpath(path), text[:start] + '\n\n' + new + '\n\n' + text[end:],
                      mode=mode)
    return True


GENERATOR = 'python -m rog_ros.nodes.settings'
"""How the generator of docs/configuration.md's tables is run (and names itself)."""


def main(argv=None) -> int:
    """
    Regenerate the tables of a configuration reference (default docs/configuration.md).

    Bad input is one line and status 2, with nothing written: a path whose folder does not
    exist printed a traceback (FileNotFoundError) before.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    if len(argv) > 1 or any(a.startswith('-') for a in argv):
        print(f'{GENERATOR}: usage: {GENERATOR} [docs/configuration.md] (one file, which it '
              'rewrites between its markers)', file=sys.stderr)
        return 2
    path = argv[0] if argv else 'docs/configuration.md'
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        problem = (f'its folder {folder} does not exist' if not os.path.lexists(folder)
                   else f'{folder} is not a folder')
        return _refuse(f'cannot update {path}: {problem}; give the path of an existing '
                       'configuration reference (docs/configuration.md, from the repository '
                       'root)')
    if os.path.isdir(path):
        return _refuse(f'{path} is a folder; give the configuration reference file in it '
                       '(configuration.md)')
    try:
        update_reference(path)
    except FileNotFoundError:
        return _refuse(f'{path} does not exist; the generator rewrites the tables of an '
                       'existing configuration reference (docs/configuration.md)')
    except (OSError, UnicodeDecodeError) as err:
        return _refuse(f'cannot update {path}: {getattr(err, "strerror", None) or err}')
    except ValueError as err:
        return _refuse(f'{path}: {err}')
    return 0


def _refuse(line: str) -> int:
    """Print the generator's one-line error; return status 2."""
    print(f'{GENERATOR}: {line}', file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main())
