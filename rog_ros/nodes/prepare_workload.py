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
Build (and cache) a fleet's workload once, in a process of its own, before the nodes start.

It also checks a run's starting weights (``init_model``) there: that check builds the workload
and reads the file, and it runs in every process that checks a fleet's settings (``rog fleet``,
``rog robot``, a launch file's process), which then held torch and the workload for the run.
So does the check of the builder's options (``workload_options``, ``--options-only``): reading
the builder's signature imports its module, and torch with it.

``rog fleet`` prepares the workload before its nodes start, so that they do not all generate
the data and pre-train at the same time on a first run. It does so in a child process: the
fleet's own process supervises the nodes for the whole run and trains nothing, and building
the workload there left torch and the workload's data in it (304 MB resident against 50 MB
without, measured with MPCOL on an x86 machine). The child shows its progress on stderr as
before and reports a failure as one line on stdout, which the fleet prints as its own. It
checks the builder's options first, refused as ``workload_options (--workload-options): ...``
as ``plan`` would say it, so the fleet's plan leaves them to it (``built_later``): a child of
their own loaded torch and the user's module once more, about 2 s before the first node.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

OPTIONS = 'workload_options (--workload-options)'
"""How a refusal of the builder's options names the setting (as ``plan`` names settings)."""
INTERRUPTED = 130
"""The child's exit status when Ctrl-C stopped it (the fleet then stops as on Ctrl-C)."""


USAGE = ('usage: python -m rog_ros.nodes.prepare_workload WORKLOAD [--init-model PATH] '
         '[--workload-options TEXT [--options-only]]')


def prepare(name: str, options: str = None) -> str | None:
    """
    Build workload ``name`` in a child process; return None, or why it failed (one line).

    ``options``: the fleet's ``workload_options`` text (``KEY=VALUE;...``), None for none.
    Raises KeyboardInterrupt when Ctrl-C stopped the child (the terminal sends it to both).
    """
    return _in_child([name] + _options_args(options))


def check_start(name: str, init_model: str, options: str = None) -> str | None:
    """Check in a child process that ``init_model`` fits workload ``name``; None or why not."""
    return _in_child([name, '--init-model', str(init_model)] + _options_args(options))


def check_options(name: str, options: str) -> str | None:
    """
    Check in a child process that workload ``name``'s builder takes ``options``; None or why not.

    Only the builder's signature is read (nothing is built), but reading it imports the
    builder's module, and with it torch, which the processes that check a fleet's settings
    (``rog fleet``, ``rog robot``, a launch file's) should not hold for the whole run.
    """
    return _in_child([name, '--workload-options', str(options), '--options-only'])


def _options_args(options) -> list:
    """Return the child's arguments that pass a ``workload_options`` text ([] for none)."""
    return ['--workload-options', str(options)] if options else []


def _parse_args(args: list):
    """
    Return ``(workload, init_model, options, options_only)`` of the child's arguments.

    None when they are malformed (the usage line is printed then).
    """
    only = args[-1:] == ['--options-only']
    args = args[:-1] if only else args
    if not args or args[0].startswith('-') or len(args) % 2 != 1:
        return None
    given = dict(zip(args[1::2], args[2::2]))
    if len(given) != len(args) // 2 or set(given) - {'--init-model', '--workload-options'}:
        return None
    if only and ('--workload-options' not in given or '--init-model' in given):
        return None
    return args[0], given.get('--init-model'), given.get('--workload-options'), only


USER_THREAD_SETTINGS = ('OMP_NUM_THREADS', 'MKL_NUM_THREADS')
"""The variables torch sizes its intra-op thread pool by, ``MKL_NUM_THREADS`` first (measured,
torch 2.13 with MKL: MKL=2 with OMP=1 gives 2 threads, OMP=2 with MKL=1 gives 1)."""


def busy_machine_threads(env: dict) -> dict:
    """
    Return ``env`` with one OpenMP thread for the child when this machine is busy.

    torch takes a thread per core; where the load already fills the cores, its threads wait
    for each other: MPCOL's first-use preparation took 12-50 s on 2 busy cores with 2
    threads and 3.8 s with 1, writing the same maps (the fleet's nodes run with 1 already;
    EACOL's data too, compared). An idle machine keeps torch's own count (a user's builder
    may use its cores; pre-training runs on one thread whatever the count,
    ``training.single_thread``, so the checkpoint is the same). A thread count the user
    set (any of ``USER_THREAD_SETTINGS``) is kept as the user left it: an
    ``MKL_NUM_THREADS`` alone got ``OMP_NUM_THREADS=1`` beside it, for the OpenMP code and
    libraries that read only that one. One that gives no count (empty, ``0``, ``x``) is no
    choice: torch and OpenMP ignore it (taking a thread per core), and an empty
    ``MKL_NUM_THREADS`` had the busy machine's child run 2 threads on 2 cores.
    """
    cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return env
    if any(_gives_a_count(env.get(name)) for name in USER_THREAD_SETTINGS) or load < cores:
        return env
    return dict(env, OMP_NUM_THREADS='1')


def _gives_a_count(value) -> bool:
    """
    Tell whether a thread variable's ``value`` sets a thread count (None: unset).

    A positive whole number, or a list of them for OpenMP's nested levels (``4,2``): what
    libgomp takes; torch reads the first number and warns about the rest, using its default.
    """
    first = (value or '').split(',')[0].strip()
    return first.isascii() and first.isdigit() and int(first) > 0


def _in_child(args: list) -> str | None:
    """Run this module in a child process with ``args``; None, or its last line of failure."""
    from rog_ros.nodes.supervisor import repo_pythonpath
    name = args[0]
    env = busy_machine_threads(dict(os.environ, PYTHONPATH=repo_pythonpath(),
                                    ROG_PARENT_PID=str(os.getpid())))
    proc = subprocess.run([sys.executable, '-m', 'rog_ros.nodes.prepare_workload'] + args,
                          stdout=subprocess.PIPE, text=True, env=env, check=False)
    if proc.returncode == 0:
        return None
    if proc.returncode in (INTERRUPTED, -signal.SIGINT):   # (killed before it could say)
        raise KeyboardInterrupt
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    if lines:
        return lines[-1]
    return f'preparing workload {name!r} failed (exit status {proc.returncode}; see above)'


def main(argv=None) -> int:
    """Build the workload (and check the starting weights); 0, 2 (cannot be) or 130."""
    parsed = _parse_args(sys.argv[1:] if argv is None else list(argv))
    if parsed is None:
        print(USAGE)
        return 2
    name, init_model, options, options_only = parsed
    try:
        # the options first (the builder's signature only), refused in the words of plan's
        # checks: rog fleet checks them here only, in the step that builds the workload
        kwargs = _checked_options(name, options)
        if kwargs is None:
            return 2
        if options_only:        # nothing is built
            return 0
        from rog_ros.nodes.assembly import load_workload
        workload = load_workload(name, kwargs)
        if init_model is not None:
            workload.starting_from(init_model)
    except KeyboardInterrupt:
        return INTERRUPTED
    except (ImportError, KeyError, OSError, ValueError) as err:
        text = err.args[0] if isinstance(err, KeyError) and err.args else err
        print(' '.join(str(text).split()))
        return 2
    return 0


def _checked_options(name: str, options) -> dict | None:
    """Return the builder's ``options`` checked, or None once their refusal is printed."""
    from rog_ros.workloads.options import from_text
    try:
        return from_text(name, options)
    except ValueError as err:
        print(f'{OPTIONS}: {" ".join(str(err).split())}')
        return None


if __name__ == '__main__':
    from rog_ros.children import die_with_parent
    # asked here, not in a preexec_fn: a launch file's process, which may start us, has threads
    parent = os.environ.get('ROG_PARENT_PID', '')
    die_with_parent(int(parent) if parent.isdigit() else None)
    sys.exit(main())
