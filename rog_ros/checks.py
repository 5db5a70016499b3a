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
Up-front checks of a whole plan's options: one ``ConfigError`` naming the bad option.

``rog sim``, ``rog compare``, ``rog reproduce`` and ``rog fleet`` call these before they build a
workload, start a process pool or launch a node, so a typo costs one line and no process
(DESIGN 8: bad input gets a clear one-line error and changes nothing). Each check names the
option as the user wrote it (``--workers``, or a parameter-file key).
"""

from __future__ import annotations

import math
import numbers
import os
import tempfile


class ConfigError(ValueError):
    """A bad option: the message is one line and names it."""


def integer(name: str, value, lo: int | None = None, hi: int | None = None) -> int:
    """Return ``value`` as an int, or raise ConfigError unless it is an integer in range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f'{name} must be an integer, got {value!r}')
    value = int(value)
    if lo is not None and value < lo:
        raise ConfigError(f'{name} must be >= {lo}, got {value}')
    if hi is not None and value > hi:
        raise ConfigError(f'{name} must be <= {hi}, got {value}')
    return value


def count(name: str, value, lo: int, hi: int) -> int:
    """
    Return ``value``, an integer in ``[lo, hi]``; ConfigError, naming the range, otherwise.

    For counts of work (iterations, repeats, runs in parallel): an absurd one (10**12) took
    hours or all memory before it failed; the line above ``hi`` says the whole range.
    """
    value = integer(name, value, lo)
    if value > hi:
        raise ConfigError(f'{name} must be in [{lo}, {hi}], got {value}')
    return value


def number(name: str, value, lo: float | None = None, hi: float | None = None,
           positive: bool = False) -> float:
    """Return ``value`` as a finite float in range (``positive``: > 0), or raise ConfigError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f'{name} must be a number, got {value!r}')
    value = float(value)
    if not math.isfinite(value):
        raise ConfigError(f'{name} must be finite, got {value}')
    if positive and not value > 0:
        raise ConfigError(f'{name} must be > 0, got {value:g}')
    if lo is not None and value < lo:
        raise ConfigError(f'{name} must be >= {lo:g}, got {value:g}')
    if hi is not None and value > hi:
        raise ConfigError(f'{name} must be <= {hi:g}, got {value:g}')
    return value


def text(name: str, value) -> str:
    """Return a non-empty string, or raise ConfigError."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f'{name} must be a non-empty string, got {value!r}')
    return value


def namespace(name: str, value) -> str:
    """
    Return ``value`` if it is an absolute ROS 2 namespace such as ``/rog``; else raise.

    Every topic name is built from it (``transport.topics.resolve``, whose rule this is), so
    a relative name or one DDS and ROS 2 would refuse must fail here, before a node starts,
    not as a traceback in a node's log.
    """
    from rog_ros.transport.topics import resolve
    text(name, value)
    try:
        if not value.startswith('/') or '//' in value:
            raise ValueError('relative, or an empty part')
        resolve('chunks', value)
    except ValueError:
        raise ConfigError(f'{name} must be an absolute ROS 2 namespace such as /rog or '
                          f'/lab/fleet_2 (letters, digits and single _ between slashes, each '
                          f'part starting with a letter), got {value!r}') from None
    return value


def workload(name: str, value) -> str:
    """Check a workload name against the registry (nothing is built)."""
    from rog_ros import workloads
    text(name, value)
    known = workloads.names()
    if value in known:
        return value
    if workloads.is_import_path(value) and not value.partition(':')[0].endswith('.py'):
        problem = workloads.import_path_problem(value)
        if problem:
            raise ConfigError(f'{name}: workload {value}: {problem}')
        return value
    raise ConfigError(f'{name}: unknown workload {value!r}; known: {", ".join(known)}, or '
                      "your own builder as 'package.module:function' (docs/workloads.md)"
                      + _as_import_path(value))


def _as_import_path(value: str) -> str:
    """Return `` (did you mean my_tasks:make?)`` for a file path given as a builder's name."""
    from rog_ros import workloads
    module, colon, attr = str(value).partition(':')
    stem = module[:-3] if module.endswith('.py') else module
    dotted = stem.replace('\\', '/').strip('/').lstrip('./').replace('/', '.')
    guess = f'{dotted}:{attr}' if colon else ''
    if guess != value and workloads.is_import_path(guess):
        return (f' (did you mean {guess}? a module name, without .py or a path; start in the '
                'folder that holds it)')
    return ''


def system(name: str, value) -> str:
    """
    Check a system spec (``bsp``, ``ssp:4``, ``rog:4``, a registered runner, ``#tag``).

    The whole spec is checked as a run would read it, tags included: Rog's engine builds its
    policy (``rog:4#bogus_field=1`` fails here), a reference system's runner module builds
    its configuration with ``check_spec(spec)`` where it has one (``adacomp:0``, ``gsp:-1``,
    ``dynsgd:2``, ``adacomp#alpha=x``), so that ``rog compare`` refuses before its first run.
    """
    import importlib
    from rog_ros.protocol.policies import make_policy
    from rog_ros.sim import systems
    text(name, value)
    spec = value.split('#')[0].strip()
    system_name, colon, arg = spec.partition(':')
    if colon and not arg.strip():
        raise ConfigError(f"{name}: nothing after ':' in {value!r}; give a value (e.g. "
                          f"{system_name.strip() or 'rog'}:4) or leave out the ':'")
    runner = systems.lookup(spec)
    if runner is not None:
        check = getattr(importlib.import_module(runner.__module__), 'check_spec', None)
        try:
            if check is not None:
                check(value.strip())
        except ValueError as err:
            raise ConfigError(f'{name}: {" ".join(str(err).split())}') from None
        return value
    from rog_ros.protocol.policies import FACTORIES
    if system_name.strip().lower() not in FACTORIES:    # list every name, not only these
        raise ConfigError(f'{name}: unknown sync system {value!r}; choose one of '
                          f'{", ".join(sorted(FACTORIES))} (with :S for a staleness threshold, '
                          f'e.g. rog:4), or one with engines of its own: '
                          f'{", ".join(systems.names())}')
    try:
        policy = make_policy(value.strip())    # with its tags: '#field=value' sets a field
    except ValueError as err:
        raise ConfigError(f'{name}: {err}') from None
    high = max_staleness()
    if policy.staleness > high:     # an OverflowError in the engines' masks, not a range
        raise ConfigError(f'{name}: the staleness threshold S of {value.strip()!r} must be in '
                          f'[0, {high}], got {policy.staleness}')
    return value


MAX_STALENESS = 1000
"""Largest staleness threshold S, for every run (the settings table's bound)."""
MAX_SEED = 2 ** 31 - 1
"""Largest seed, what torch and numpy take (the settings table's bound)."""
MAX_FLEET_ITERATIONS = 1_000_000
"""Most ``iterations`` of a fleet (the settings table's bound, also of ``eval_every`` and
``checkpoint_every``): at one iteration a second, 11 days of training; 10**15 was taken, and
the fleet trained until it was stopped."""


def max_staleness() -> int:
    """Return the largest staleness threshold S: rog fleet's bound, one range for every run."""
    return MAX_STALENESS


def max_seed() -> int:
    """Return the largest seed (what torch and numpy take): rog fleet's bound."""
    return MAX_SEED


def system_key(value: str) -> str:
    """
    Return what a system spec means, written one way: two specs that run the same give one.

    Rog's engine reads a name in any case and its threshold as a number, with the system's
    default where none is given: ``rog``, ``ROG: 04`` and ``rog:4`` are all ``rog:4`` (the
    policy's own name), while ``bsp`` is not ``ssp:0``. A reference system's runner reads its
    name in any case and its argument itself, so the argument is compared as written
    (``gsp`` and ``gsp:3`` count as two). Tags are kept in order, without blanks around them
    or empty ones: each sets an option or labels the run. A spec that does not parse is
    returned stripped (``system`` says what is wrong with it).
    """
    from rog_ros.protocol.policies import make_policy
    from rog_ros.sim import systems
    base, _, tags = value.partition('#')
    tags = ''.join(f'#{t.strip()}' for t in tags.split('#') if t.strip())
    system_name, colon, arg = base.partition(':')
    if systems.lookup(base) is not None:
        return system_name.strip().lower() + (f':{arg.strip()}' if arg.strip() else '') + tags
    try:
        return make_policy(base).name + tags
    except ValueError:
        return value.strip()


def trace(name: str, value, allow_none: bool = False) -> str:
    """
    Check a trace: a preset, a readable trace file, a list of them, or (``allow_none``) ``none``.

    A comma-separated list gives robot r entry r mod k (``rog_ros.net.trace_spec``); every
    entry is checked, and an error names the one that failed. A ROS 2 bag's entry may name a
    robot and a rate (``run.mcap#netmon_2#emulated``); a bag of several robots named without
    one is checked for every robot, and refused when a rank is missing (robot r follows the
    bag's robot of rank r).
    """
    from rog_ros.net.trace_spec import bag_entries, parse, sources
    from rog_ros.net.traces import load_entry, PRESETS
    text(name, value)
    if allow_none and value in ('none', ''):
        return value
    try:
        entries = sources(value)
    except ValueError as err:
        raise ConfigError(f'{name}: {err}') from None
    for i, entry in enumerate(entries):
        label = (name if len(entries) == 1 else
                 f'{name} entry {i} (robot r follows entry r mod {len(entries)})')
        if entry in PRESETS:
            continue
        try:
            source = parse(entry).source
        except ValueError as err:
            raise ConfigError(f'{label}: {err}') from None
        if source in PRESETS:
            raise ConfigError(f'{label}: {entry!r}: a preset takes no #tag (a robot or a rate '
                              "is picked only from a ROS 2 bag of netmon's LinkStats)")
        if not os.path.exists(source):
            raise ConfigError(f'{label}: {entry!r} is neither a preset '
                              f'({", ".join(sorted(PRESETS))}) nor an existing file')
        try:
            robots = bag_entries(entry)
            if len(robots) > 1:         # the robots that ranks follow, not the server's
                from rog_ros.net.ros_bag import rank_plan, robots as bag_robots
                names, _ = rank_plan(source, bag_robots(source))
                robots = [parse(entry)._replace(robot=name).text for name in names]
            for robot in robots:
                load_entry(robot)
        except (OSError, ValueError) as err:
            raise ConfigError(f'{label}: {" ".join(str(err).split())}') from None
    return value


def int_list(name: str, value: str, lo: int | None = None, hi: int | None = None) -> list:
    """Parse a comma-separated list of integers (at least one), each in [``lo``, ``hi``]."""
    parts = [p.strip() for p in str(value).split(',') if p.strip()]
    if not parts:
        raise ConfigError(f'{name} must list at least one integer, got {value!r}')
    out = []
    for p in parts:
        try:
            v = int(p)
        except ValueError:
            raise ConfigError(f'{name}: {p!r} is not an integer') from None
        out.append(integer(name, v, lo, hi))
    return out


def distinct(name: str, values: list, key=None) -> list:
    """
    Return ``values`` if no entry repeats; else raise.

    A comparison that lists a system or a seed twice ran it once and counted it twice (two
    of two seeds reached, from one run). ``key(value)`` says what an entry means
    (``system_key``): two spellings of one entry are refused as well, naming both.
    """
    seen = {}
    for v in values:
        k = v if key is None else key(v)
        if k not in seen:
            seen[k] = v
        elif seen[k] == v:
            raise repeated(name, v)
        else:
            raise ConfigError(f'{name} lists {seen[k]} and {v}, two spellings of {k}; list it '
                              'once')
    return values


def repeated(name: str, value) -> ConfigError:
    """Return the error for an entry listed twice (``distinct``'s, and a seed range's)."""
    return ConfigError(f'{name} lists {value} more than once; list each once')


def name_list(name: str, value: str) -> list:
    """Parse a comma-separated list of names (at least one)."""
    parts = [p.strip() for p in str(value).split(',') if p.strip()]
    if not parts:
        raise ConfigError(f'{name} must name at least one entry, got {value!r}')
    return parts


def output_dir(name: str, value) -> str:
    """
    Return ``value`` if a command can make it a directory and write in it; else raise.

    Checked before any work, so that an existing file, a parent that is a file, or a place
    where nothing can be written (a read-only or virtual file system such as /proc, no
    permission) costs one line instead of a traceback after the run. The probe writes one
    temporary file and removes it, and removes again every directory it had to create: a
    refusal leaves nothing behind.
    """
    text(name, value)
    target = os.path.abspath(value)
    if os.path.lexists(target) and not os.path.isdir(target):
        raise ConfigError(f'{name} {value}: exists and is not a directory; give a new or an '
                          'existing directory')
    missing, parent = [], target
    while not os.path.lexists(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise ConfigError(f'{name} {value}: cannot be created, {parent} is not a directory')
    created = []
    try:
        for path in reversed(missing):
            os.mkdir(path)
            created.append(path)
        fd, probe = tempfile.mkstemp(dir=target, prefix='.rog-write-test-')
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise ConfigError(f'{name} {value}: cannot create or write this directory '
                          f'({err.strerror or err}); give another one') from None
    finally:
        for path in reversed(created):
            try:
                os.rmdir(path)
            except OSError:
                pass
    return value


def result_paths(name: str, out: str, files=(), folders=()) -> str:
    """
    Return ``out`` unless a result's name in it is taken by the other kind; else raise.

    A folder named like a result file (``summary.json``, ``report.md``), or a file named like a
    result folder (a comparison's ``runs``), made the run fail with a traceback when it wrote
    its results, after all its work. ``files`` and ``folders`` are the names the command writes
    directly in ``out``.
    """
    for entry, want_dir in [(f, False) for f in files] + [(d, True) for d in folders]:
        path = os.path.join(out, entry)
        if os.path.lexists(path) and os.path.isdir(path) != want_dir:
            what = 'a folder' if os.path.isdir(path) else 'a file'
            raise ConfigError(f'{name} {out}: {path} is {what}, where this command writes its '
                              f'{"folder" if want_dir else "file"} {entry}; move it away or '
                              'give another folder')
    return out


def output_file(name: str, value, in_place: bool = False) -> str:
    """
    Return ``value`` if a run can write a file there at its end; else raise ConfigError.

    A recording is written when the run ends (or as it goes): a path that is a directory, or
    whose folder is missing or read-only, must cost one line before the run, not the run's
    record after it. The folder is not created (the writers open the file in it).
    ``in_place``: the writer opens the file itself (an MCAP bag), so a file that exists and
    may be written (``/dev/null``, a prepared file in a read-only folder) is enough; a writer
    that renames a temporary file into place (a trace) needs the folder.
    """
    text(name, value)
    target = os.path.abspath(value)
    if os.path.isdir(target) or value.endswith(os.sep):
        raise ConfigError(f'{name} {value}: is a directory; give the name of a file (in it, '
                          'or anywhere else)')
    if in_place and os.path.exists(target) and os.access(target, os.W_OK):
        return value
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise ConfigError(f'{name} {value}: the folder {folder} does not exist (or is not a '
                          'directory); create it first')
    if not os.access(folder, os.W_OK):
        raise ConfigError(f'{name} {value}: cannot write in {folder}')
    return value
