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
Every ``rog ...`` command line of README.md and docs/*.md is one the current ``rog`` takes.

A new user copies command lines from the documentation: a flag, a subcommand or a value that
the parser or the command's own up-front checks refuse is a defect of the docs (or of the
CLI). The command lines are read from fenced code blocks, indented code blocks and inline
code spans; each is parsed by ``cli.build_parser()`` (flags spelled in full: a prefix that
argparse completes today breaks when a flag that shares it is added) and then given to the
checks its command runs before it starts anything (``cli_sim._check_sim``, ``plan.plan``, ...).
A command line the docs show being refused must be refused (``REFUSED``). Nothing is trained,
simulated or started: trace files the docs name are checked by name only (they are the
user's), and a process that would start fails the test.

Placeholders are given plausible values (``NAME``, ``K``, ``[--flag V]``); ``...`` stands for
options left out, so such a line is checked for the flags it shows, not for completeness,
and so is an inline span with at most one option (prose that names a flag, ``rog fleet
--rtt-floor``).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.machinery
import io
import os
from pathlib import Path
import re
import shlex
import subprocess
import sys
import types

import pytest
from rog_ros import checks, cli, cli_bench, cli_compare, cli_options, cli_sim
from rog_ros.experiments import chaos, chaos_fleet
from rog_ros.net import cli_trace, trace_spec, traces
from rog_ros.nodes import cli_security, fleet, plan, prepare_workload, respawn, robot, settings

ROOT = Path(__file__).resolve().parent.parent
DOCS = ('README.md',) + tuple(sorted(f'docs/{p.name}' for p in (ROOT / 'docs').glob('*.md')))
FENCE = re.compile(r'^\s*(```|~~~)')
INLINE = re.compile(r'`([^`]+)`')
CHAIN = re.compile(r'&&|\|\||[;|]')
PROMPT = re.compile(r'^(\$\s+)?(\S*/)?rog\s+\S')
PLACEHOLDERS = (('NAME', 'adacomp'), ('K', '1'), ('N', '5'), ('FILE', 'fleet.key'),
                ('PATH', 'fleet.key'), ('DIR', 'runs/dir'),
                ('LOG', 'bw_replay-1.log'))
"""Whole-word placeholders of the docs and a value each takes (NAME: a reference system)."""
SKIPPED = (
    ('<', 'a <placeholder> of free text: no value stands for it'),
    ('$', 'a shell variable: its value is not in the docs'),
)
"""Text that makes a command line unusable here, and why it is skipped."""
REFUSED = (('rog sim --sync gsp --staleness 5', '--sync gsp:5'),)
"""Command lines the docs show being refused, and a part of the refusal they describe."""
MENTIONS = (('rog robot --role worker', 'prose that names the role; a worker needs --rank'),)
"""Inline spans that name a command in prose: parsed, but not given to its value checks."""
USER_MODULE = 'my_tasks'
"""The module of docs/workloads.md's own workload (``my_tasks:make_my_task``)."""


def _code_lines(text: str):
    """Yield ``(line number, text, kind)`` of every code line and inline code span."""
    fenced, continued, prose = False, False, []
    for number, line in enumerate(text.splitlines() + [''], 1):
        indented = not fenced and line.startswith(('    ', '\t')) and (
            continued or bool(PROMPT.match(line.strip())))
        if prose and (indented or FENCE.match(line) or not line.strip()):
            yield from _spans(prose)
            prose = []
        continued = indented and line.rstrip().endswith('\\')
        if FENCE.match(line):
            fenced = not fenced
        elif fenced:
            yield number, line, 'fenced'
        elif indented:
            yield number, line, 'indented'
        elif line.strip():
            prose.append((number, line))


def _spans(prose: list):
    """Yield ``(line number, text, 'inline')`` of the code spans of a paragraph's lines."""
    first, text = prose[0][0], '\n'.join(line for _, line in prose)
    for match in INLINE.finditer(text):
        yield first + text.count('\n', 0, match.start()), ' '.join(match.group(1).split()), \
            'inline'


def _joined(text: str):
    """Yield ``(line number, text, kind)`` with lines ending in a backslash joined."""
    held = None
    for number, line, kind in _code_lines(text):
        if held is not None:
            number, line = held[0], held[1] + ' ' + line.strip()
            held = None
        if kind != 'inline' and line.rstrip().endswith('\\'):
            held = (number, line.rstrip()[:-1])
            continue
        yield number, line, kind


def _without_comment(line: str) -> str:
    """Return ``line`` without a shell comment (a ``#`` that starts a word, as bash reads it)."""
    return re.sub(r'(^|\s)#.*$', '', line)


def _alternatives(text: str) -> list:
    """Return ``text`` once per choice of its ``a|b|c`` words (prose: one of them), or alone."""
    match = re.search(r'(?<=\s)[^\s|]+(\|[^\s|]+)+(?=\s|$)', text)
    if match is None:
        return [text]
    return [one for choice in match.group(0).split('|')
            for one in _alternatives(text[:match.start()] + choice + text[match.end():])]


def _commands() -> tuple:
    """Return ``(where, text, kind)`` of every ``rog ...`` command line of the docs."""
    found = []
    for doc in DOCS:
        seen = {}
        for number, line, kind in _joined((ROOT / doc).read_text(encoding='utf-8')):
            lines = _alternatives(line) if kind == 'inline' else (line,)
            parts = [p for one in lines for p in CHAIN.split(_without_comment(one))]
            for part in parts:
                part = part.strip()
                if not PROMPT.match(part) or re.match(r'^(\S*/)?rog \S+:', part):
                    continue   # not rog, or a message it prints (`rog fleet: ...`)
                where = f'{doc}:{number}'
                seen[where] = seen.get(where, 0) + 1
                if seen[where] > 1:
                    where += f'.{seen[where]}'
                found.append((where, re.sub(r'^\$\s+', '', part), kind))
    return tuple(found)


def _argv(text: str) -> list:
    """Split a command line into rog's argv, placeholders filled in (after the ``rog``)."""
    text = re.sub(r'\[(-[^\]]*)\]', r'\1', text.replace('...', ' '))   # [--opt V]: optional
    words = shlex.split(text)[1:]
    values = dict(PLACEHOLDERS)
    return [values.get(w, w) for w in words]


def _partial(text: str, kind: str, argv: list) -> bool:
    """Tell whether a line shows only some options (``...``, or prose naming one option)."""
    options = [w for w in argv if w.startswith('--')]
    return '...' in text or (kind == 'inline' and len(options) <= 1)


def _lenient(parser) -> argparse.ArgumentParser:
    """Let every argument of ``parser`` and its subcommands be left out, or its value."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _lenient(sub)
            continue
        action.required = False
        if action.nargs is None:
            action.nargs = '?'
    return parser


@functools.lru_cache(maxsize=None)
def _parser(lenient: bool) -> argparse.ArgumentParser:
    """Return rog's parser (``lenient``: with every argument optional); built once each."""
    return _lenient(cli.build_parser()) if lenient else cli.build_parser()


def _parse(argv: list, lenient: bool = False) -> tuple:
    """Parse ``argv`` as ``rog`` does: ``(args, extra, error)``; args None after --version."""
    said = io.StringIO()
    parser = _parser(lenient)
    with contextlib.redirect_stderr(said), contextlib.redirect_stdout(said):
        try:
            args, extra = parser.parse_known_args(argv)
        except SystemExit as stop:       # --version: 0; else one line, 'rog ...: ...'
            return None, [], '' if stop.code == 0 else ' '.join(said.getvalue().split())
    return args, extra, ''


def _abbreviated(argv: list) -> list:
    """Return the flags of ``argv`` that only a prefix match finds (``--stalenes``)."""
    parser, known, short = _parser(False), set(), []
    for word in argv:
        known |= set(parser._option_string_actions)
        if word.startswith('--') and word.split('=')[0] not in known:
            short.append(word)
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)),
                   None)
        if sub is not None and word in sub.choices:
            parser = sub.choices[word]
    return short


def _file_name(entry: str) -> bool:
    """Tell whether a trace entry names a file (a path or an extension), not a preset."""
    return os.sep in entry or bool(os.path.splitext(entry)[1])


def _trace_names(name, value, allow_none=False):
    """Check a --trace as ``checks.trace`` does, but files by their name alone (the user's)."""
    checks.text(name, value)
    if allow_none and value in ('none', ''):
        return value
    for entry in trace_spec.sources(value):
        if entry not in traces.PRESETS and not _file_name(entry):
            raise checks.ConfigError(f'{name}: {entry!r} is neither a preset '
                                     f'({", ".join(sorted(traces.PRESETS))}) nor a file name')
    return value


def _check_trace_source(args) -> None:
    """Check ``rog trace stats|plot`` SOURCE and the options used on a preset."""
    cli_trace._check_seed(args)
    for entry in trace_spec.sources(args.source):
        if entry in traces.PRESETS:
            cli_trace._check_span(args.duration)
        elif not _file_name(entry):
            raise KeyError(f'{entry!r} is neither a file nor a preset')
    compare = getattr(args, 'compare', None)
    if compare is not None and compare not in traces.TARGETS:
        raise KeyError(cli_trace._unknown(compare))


def _check_trace_gen(args) -> None:
    """Check ``rog trace gen`` as ``cli_trace._cmd_gen`` does before it generates."""
    if args.preset not in traces.PRESETS:
        raise KeyError(cli_trace._unknown(args.preset))
    cli_trace._check_seed(args)
    cli_trace._check_scale(args.scale)
    cli_trace._check_span(args.duration, args.dt)


def _check_trace_file(args) -> None:
    """Check ``rog trace replay|convert`` options as their commands do (the file is the user's)."""
    if getattr(args, 'seed', None) is not None:
        cli_trace._check_seed(args)
    cli_trace._check_scale(args.scale)


def _check_fleet(args) -> None:
    """Check ``rog fleet`` options as ``fleet.run`` does before a node starts."""
    file_params = plan.load_parameter_file(args.config) if args.config else {}
    specs = plan.plan(file_params, fleet._overrides(args, os.path.abspath(args.out)))
    plan.check_given_staleness(specs[0].parameters['sync'], args.staleness)
    checks.output_dir('--out', args.out)


def _check_robot(args) -> None:
    """Check ``rog robot`` options as ``robot.run`` does before a node starts."""
    over = {s.name: getattr(args, s.name, None) for s in settings.for_role('fleet')
            if s.name not in ('rank', 'fleet_key_file', 'record')}
    over.update({name: getattr(args, name, None) for name in robot.ROBOT_NODE_SETTINGS})
    robot._check_robot_args(args)
    file_params = plan.load_parameter_file(args.config) if args.config else {}
    specs = robot.robot_plan(args.role, args.rank or 0, file_params, over)
    plan.check_given_staleness(specs[0].parameters['sync'], args.staleness)
    respawn.check_respawn(respawn.parse_respawn(args.respawn), specs)


def _check_bench_faults(args) -> None:
    """Check ``rog bench faults`` --seeds and --systems as its command does."""
    from rog_ros.experiments.bench_faults import parse_seeds
    from rog_ros.protocol.policies import make_policy
    parse_seeds(args.seeds)
    for spec in args.systems.split(','):
        make_policy(spec.strip())


def _check_chaos(args) -> None:
    """Check ``rog chaos`` --scenario and --sync as ``chaos.run`` does."""
    chaos.parse_scenarios(args.scenario)
    if args.sync not in chaos_fleet.CHAOS_SYSTEMS:
        raise ValueError(f'--sync must be one of {", ".join(chaos_fleet.CHAOS_SYSTEMS)}')


def _check_model(args) -> None:
    """Refuse a --model the simulator's commands refuse (``cli_options.bad_model``)."""
    bad = cli_options.bad_model(args)
    if bad:
        raise ValueError(bad)


def _value_checks(args) -> tuple:
    """Return the checks the command of ``args`` runs on its values before it starts."""
    command = (args.command, getattr(args, 'bench_command', None) or
               getattr(args, 'trace_command', None) or getattr(args, 'security_command', None))
    return {
        ('sim', None): (cli_sim._check_sim, _check_model),
        ('compare', None): (cli_compare._check_compare, _check_model),
        ('reproduce', None): (cli_compare._check_reproduce,),
        ('fleet', None): (_check_fleet,),
        ('robot', None): (_check_robot,),
        ('chaos', None): (_check_chaos,),
        ('bench', 'overhead'): (cli_bench._check_bench_overhead,),
        ('bench', 'codec'): (cli_bench._check_bench_codec,),
        ('bench', 'transport'): (cli_bench._check_bench_transport,),
        ('bench', 'faults'): (_check_bench_faults,),
        ('trace', 'gen'): (_check_trace_gen,),
        ('trace', 'stats'): (_check_trace_source,),
        ('trace', 'plot'): (_check_trace_source,),
        ('trace', 'replay'): (_check_trace_file,),
        ('trace', 'convert'): (_check_trace_file,),
        ('security', 'keystore'): (cli_security._check_keystore,),
    }.get(command, ())


def _options_here(name: str, text: str):
    """Check workload options as the fleet's child process does, in this process (no child)."""
    from rog_ros.workloads.options import from_text
    try:
        from_text(name, text)
    except ValueError as err:
        return ' '.join(str(err).split())
    return None


def _refusal(args) -> str:
    """Run the value checks of ``args``' command; return what the first refusal says, or ''."""
    for check in _value_checks(args):
        try:
            check(args)
        except (ValueError, KeyError) as err:       # ConfigError is a ValueError
            return f'{check.__name__}: {err}'
    return ''


def install_docs_workload(monkeypatch) -> None:
    """Make docs/workloads.md's own workload module importable, as the docs have it installed."""
    user = types.ModuleType(USER_MODULE)
    user.__spec__ = importlib.machinery.ModuleSpec(USER_MODULE, None)

    def make_my_task(seed=0, hidden=64):
        """Stand for docs/workloads.md's builder: its options, nothing built."""
        raise AssertionError('a check built the workload')
    user.make_my_task = make_my_task
    monkeypatch.setitem(sys.modules, USER_MODULE, user)


@pytest.fixture
def checks_only(monkeypatch, tmp_path):
    """Run checks in an empty folder, trace files by name, and fail if a process starts."""
    def forbidden(*args, **kwargs):
        """Fail: a documented command's checks must not start anything."""
        raise AssertionError('a check started a process')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, 'path', list(sys.path))    # (a user's module: cwd is added)
    monkeypatch.setattr(subprocess, 'Popen', forbidden)
    monkeypatch.setattr(checks, 'trace', _trace_names)
    monkeypatch.setattr(prepare_workload, 'check_options', _options_here)
    install_docs_workload(monkeypatch)


def test_the_docs_hold_commands_of_every_kind():
    """Find more than 20 command lines, in code blocks of both kinds and in inline code."""
    # Execute
    found = _commands()
    kinds = {kind for _, _, kind in found}
    # Assert
    assert len(found) > 20, f'only {len(found)} rog command lines found in the docs'
    assert kinds == {'fenced', 'indented', 'inline'}, kinds
    assert any(text.startswith('.venv/bin/rog fleet ') for _, text, _ in found)


@pytest.mark.parametrize('where, text, kind', _commands(), ids=[c[0] for c in _commands()])
def test_documented_command_is_accepted(where, text, kind, checks_only):
    """Parse a documented command as rog does, then run the checks of its values."""
    # Arrange
    skip = next((why for mark, why in SKIPPED if mark in text), None)
    if skip:
        pytest.skip(f'{where}: {skip}: {text}')
    argv = _argv(text)
    partial = _partial(text, kind, argv)
    refused = dict(REFUSED).get(text)
    # Execute
    args, extra, error = _parse(argv)
    if error and partial:       # left out: a required option or a value (`rog fleet --netns`)
        args, extra, error = _parse(argv, lenient=True)
        args = None
    checked = args is not None and '...' not in text and text not in dict(MENTIONS)
    said = _refusal(args) if checked else ''
    # Assert
    assert not error, f'{where}: `{text}`: {error}'
    assert not extra, f'{where}: `{text}`: unrecognized arguments: {" ".join(extra)}'
    assert not _abbreviated(argv), f'{where}: `{text}`: give {_abbreviated(argv)} in full'
    if refused:
        assert refused in said, f'{where}: `{text}` is shown refused ({refused}), got {said!r}'
    else:
        assert not said, f'{where}: `{text}`: {said}'
