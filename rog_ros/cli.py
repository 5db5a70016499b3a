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
The ``rog`` command: simulate, benchmark and inspect fleet training.

    rog sim --toy [--systems bsp,ssp:4,rog:4]   protocol engines on a toy problem
    rog sim --workload mpcol --sync rog ...      one simulated run (summary.json, CSVs)
    rog compare --workload mpcol --out DIR        systems x seeds, report and plots
    rog reproduce [PAPER] --out DIR               the paper's experiment set, one report
    rog report RUN_DIR                            report.md and plots of a fleet or sim run
    rog fleet --workload mpcol --sync rog ...     server, workers, netmon as real processes
    rog robot --role server|worker ...            one robot's nodes of a real fleet
    rog chaos --scenario all [--json]             fault scenarios against a real local fleet
    rog bench overhead|codec|transport|server|faults
                                                  what rows, DEFSGDM, DDS, the server cost;
                                                  random fault sweeps of the engines
    rog trace gen|stats|plot|replay|convert       bandwidth traces
    rog security key|keystore                     fleet key, SROS2 keystore
    rog doctor                                    is this machine ready, and what to fix
    rog --version                                 the installed version
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import sys

from rog_ros import cli_bench, cli_compare, cli_report, cli_sim
from rog_ros.cli_options import one_line


class _OneLineParser(argparse.ArgumentParser):
    """
    An ArgumentParser whose usage errors are one line: the command, the error, where to look.

    argparse prints the whole usage before the error: 18 lines for ``rog fleet``, with the
    mistyped option somewhere in the middle. Subcommands' parsers are of this class too
    (``add_subparsers`` makes them of its parser's class), so each names itself.
    """

    def error(self, message: str):
        """Print ``PROG: MESSAGE`` (with the closest option to a mistyped one); exit 2."""
        hint = _closest_options(self, message) if message.startswith('unrecognized') else ''
        self.exit(2, f'{self.prog}: {message}{hint}; see {self.prog} --help\n')


def _closest_options(parser, message: str) -> str:
    """
    Return `` (did you mean --x?)`` for the options ``message`` names that are near one.

    A flag given in part (``--iter``: options are taken in full only, ``allow_abbrev`` off) is
    near the options it begins.
    """
    import difflib
    known = [o for o in parser._option_string_actions if o.startswith('--')]
    guesses = []
    for word in message.split(':', 1)[-1].split():
        flag = word.split('=')[0]
        if word.startswith('--') and flag not in known:
            begun = sorted(o for o in known if o.startswith(flag)) if len(flag) > 3 else []
            guesses += begun or difflib.get_close_matches(flag, known, n=1, cutoff=0.75)
    return f' (did you mean {", ".join(guesses)}?)' if guesses else ''


def build_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog='rog', allow_abbrev=False,
        description='Rog fleet training for ROS 2: simulate, benchmark, inspect.')
    parser.add_argument('--version', action='version', version=f'%(prog)s {_version()}')
    sub = parser.add_subparsers(dest='command', metavar='COMMAND')
    sub.required = True
    cli_sim.add_parser(sub)
    cli_compare.add_parser(sub)
    cli_bench.add_parser(sub)
    cli_report.add_parser(sub)
    from rog_ros.nodes import fleet as cli_fleet
    cli_fleet.add_parser(sub)
    from rog_ros.experiments import chaos
    chaos.add_parser(sub)
    from rog_ros.net import cli_trace
    cli_trace.add_parser(sub)
    from rog_ros.nodes import cli_security
    cli_security.add_parser(sub)
    from rog_ros.nodes import robot
    robot.add_parser(sub)
    from rog_ros.nodes import doctor
    doctor.add_parser(sub)
    return parser


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a CI timeout, a job scheduler) or SIGHUP, handled as Ctrl-C is."""

    exit_status = 143       # 128 + SIGTERM (a plain KeyboardInterrupt: 130)

    def __init__(self, signum: int = 15):
        super().__init__()
        self.exit_status = 128 + int(signum)

    @property
    def what(self) -> str:
        """Return how the stop is said: ``terminated (SIGTERM)`` or ``hung up (SIGHUP)``."""
        return 'hung up (SIGHUP)' if self.exit_status == 129 else 'terminated (SIGTERM)'


def _raise_terminated(signum, frame) -> None:
    if signum == getattr(signal, 'SIGHUP', None):
        # A dropped session hangs up more than once (the shell's SIGHUP, then the kernel's):
        # the first one stops the command, the others must not cut its cleanup short; and
        # writes to the dead terminal would fail that cleanup with EIO. Ignoring comes
        # first: a second hang-up that came while this handler still imported ran it again
        # and raised in the middle of the cleanup (CI: status 129, no cleanup).
        signal.signal(signum, signal.SIG_IGN)
        _QUIET_IF_HUNG_UP[0]()
    raise Terminated(signum)


_QUIET_IF_HUNG_UP = [lambda: None]      # set by _sigterm_as_interrupt: no import in a handler


def _sigterm_as_interrupt() -> dict:
    """
    Make SIGTERM and SIGHUP unwind like Ctrl-C; return ``{signal: handler to restore}``.

    By default they ended the process on the spot: a pool of ``rog compare`` was never
    shut down (the resource tracker then reported leaked semaphores) and nothing was tidied,
    and a dropped SSH session (SIGHUP) left ``rog robot`` without its closing lines. Only the
    main thread can set handlers, and a handler someone else set (or ``nohup``'s ignored
    SIGHUP) is kept.
    """
    import threading
    if threading.current_thread() is not threading.main_thread():
        return {}
    from rog_ros.nodes.signals import quiet_if_hung_up
    _QUIET_IF_HUNG_UP[0] = quiet_if_hung_up
    previous = {}
    for sig in (signal.SIGTERM, getattr(signal, 'SIGHUP', None)):
        if sig is not None and signal.getsignal(sig) is signal.SIG_DFL:
            previous[sig] = signal.signal(sig, _raise_terminated)
    return previous


def _version() -> str:
    """Return the installed package's version (the source tree's when not installed)."""
    try:
        from importlib.metadata import version, PackageNotFoundError
        try:
            return version('rog_ros')
        except PackageNotFoundError:
            pass
    except ImportError:
        pass
    from rog_ros import __version__
    return __version__


def main(argv=None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:         # said by the subcommand's parser, with its usage line, not rog's
        _chosen_parser(parser, args).error(f'unrecognized arguments: {" ".join(extra)}')
    previous = _sigterm_as_interrupt()
    try:
        if getattr(args, 'command', None) == 'trace':
            from rog_ros.net import cli_trace
            return cli_trace.run(args)
        return args.func(args)
    except KeyboardInterrupt as stop:
        # Ctrl-C or SIGTERM: one line, not a traceback (finished runs of compare and
        # reproduce are kept and reused by the next call; rog fleet stops its nodes itself)
        name = _command_name(args, 'command', 'bench_command')
        kept = (_finished_runs(args.out) if getattr(args, 'command', None)
                in ('compare', 'reproduce') else 0)
        term = isinstance(stop, Terminated)
        try:
            print(f'\nrog {name}: {stop.what if term else "interrupted"}'
                  + (f'; {kept} finished run(s) in {args.out} are kept, and the same command '
                     'reuses them' if kept else ''), file=sys.stderr)
        except OSError:         # a terminal that went away: the status still says it
            pass
        return stop.exit_status if term else 130
    except BrokenPipeError:
        # The reader of stdout went away (rog doctor | grep -q fail, rog report | head):
        # end as a shell tool killed by SIGPIPE would, without a traceback; stdout goes to
        # /dev/null so that the interpreter's final flush does not raise again.
        _quiet_stdout()
        return 128 + getattr(signal, 'SIGPIPE', 13)
    except OSError as err:
        if err.errno in _IN_THE_WAY:
            return _in_the_way(args, err)
        if err.errno not in _FULL_OR_READ_ONLY:
            raise
        # a full disk or a read-only one under the output: one line, status 1, what was
        # finished before stays (every result file is written whole or not at all)
        name = _command_name(args, 'command', 'bench_command', 'what')
        where = f': {err.filename}' if err.filename else ''
        try:
            print(f'rog {name}: cannot write{where}: {err.strerror}; free some space or choose '
                  'another output folder', file=sys.stderr)
        except OSError:         # stderr on the same full disk: the status still says it
            pass
        return 1
    except Exception as err:
        # rog_ros.children is imported only by the commands that start processes (it pulls
        # in multiprocessing and pickle): a ProcessDied can only come once it has been
        died = getattr(sys.modules.get('rog_ros.children'), 'ProcessDied', None)
        if died is None or not isinstance(err, died):
            raise
        # a run's process died (the out-of-memory killer's SIGKILL) in a pool without its own
        # handling of a death (rog reproduce aet|fleet, rog bench faults): one line, status 1
        name = _command_name(args, 'command', 'bench_command', 'what')
        print(f'rog {name}: a run failed: {one_line(err)}', file=sys.stderr)
        return 1
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


_FULL_OR_READ_ONLY = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})
"""Write errors a command reports in one line: no space, no quota, a read-only disk, a file
over the size limit."""


_IN_THE_WAY = frozenset({errno.EISDIR, errno.ENOTDIR})
"""Write errors of a path taken by the other kind: a folder where a result file goes, a file
where a folder goes."""


def _in_the_way(args, err: OSError) -> int:
    """
    Say in one line that a folder or a file is in the way of a result; return status 1.

    The commands check the names they write before they start (``checks.result_paths``); this
    is the line for one they did not foresee, instead of a traceback.
    """
    name = _command_name(args, 'command', 'bench_command', 'what')
    path = err.filename2 or err.filename
    what = 'is a folder' if err.errno == errno.EISDIR else 'is under a file, not a folder'
    try:
        print(f'rog {name}: cannot write {path}: it {what}; move what is in the way or choose '
              'another output folder', file=sys.stderr)
    except OSError:
        pass
    return 1


def _command_name(args, *parts: str) -> str:
    """Name the command that ``args`` ran, from those of their ``parts`` that are set."""
    return ' '.join(str(getattr(args, a)) for a in parts if getattr(args, a, None))


def _chosen_parser(parser, args):
    """Return the parser of the (sub)command ``args`` chose, the deepest one."""
    while True:
        sub = next((a for a in parser._actions
                    if isinstance(a, argparse._SubParsersAction)), None)
        chosen = getattr(args, sub.dest, None) if sub is not None else None
        if chosen not in getattr(sub, 'choices', {}):
            return parser
        parser = sub.choices[chosen]


def _quiet_stdout() -> None:
    """Point stdout at /dev/null (after its reader closed the pipe)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):   # no real stdout (a test's capture)
        pass


def _finished_runs(out: str) -> int:
    """Count the finished runs below ``out``: a run's ``summary.json`` names its system."""
    count = 0
    for root, _, files in os.walk(out or ''):
        if 'summary.json' in files:
            try:
                with open(os.path.join(root, 'summary.json'), encoding='utf-8') as fh:
                    summary = json.load(fh)
            except (OSError, ValueError):
                continue
            count += isinstance(summary, dict) and 'system' in summary
    return count


if __name__ == '__main__':
    sys.exit(main())
