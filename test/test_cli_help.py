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
"""What ``rog --help`` and the subcommands' help say: defaults, descriptions, the version."""

import argparse
import json
import os
import subprocess
import sys

import pytest
from rog_ros import cli, cli_sim
from rog_ros.nodes.push_systems import PUSH_SYSTEMS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _help(argv, capsys, monkeypatch):
    monkeypatch.setenv('COLUMNS', '400')           # one line per option: no wrapping
    with pytest.raises(SystemExit) as done:
        cli.build_parser().parse_args(argv + ['--help'])
    assert done.value.code == 0
    return capsys.readouterr().out


def _option(text, flag):
    """Return the help of ``flag``: its line and the next (where a long metavar pushes it)."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith(flag + ' ')
              or line.strip() == flag or line.strip().startswith(flag + ','))
    return ' '.join(lines[at:at + 2])


def test_version_prints_the_package_version(capsys):
    from rog_ros import __version__
    with pytest.raises(SystemExit) as done:
        cli.build_parser().parse_args(['--version'])
    assert done.value.code == 0 and capsys.readouterr().out == f'rog {__version__}\n'


@pytest.mark.parametrize('command', [['fleet'], ['robot']])
def test_fleet_and_robot_help_shows_no_none_default_and_no_markup(command, capsys, monkeypatch):
    text = _help(command, capsys, monkeypatch)
    assert '(default None)' not in text and '``' not in text
    assert "Learning rate; 0 = the workload's own." in _option(text, '--lr')
    config = _option(text, '--config')
    assert 'default: none' in config and 'default: config/fleet.yaml' not in config
    assert '(config/fleet.yaml)' not in config
    if command == ['fleet']:
        assert 'output directory (default rog_fleet_run)' in _option(text, '--out')
        assert text.split('\n\n')[1].startswith('rog fleet: a whole fleet on this machine')


def test_bench_and_trace_subcommands_have_descriptions_and_defaults(capsys, monkeypatch):
    for sub in ('overhead', 'codec', 'transport', 'server', 'faults'):
        text = _help(['bench', sub], capsys, monkeypatch)
        assert 'Prints JSON' in text or 'JSON' in text.split('options:')[0], sub
    assert '(default 3)' in _option(_help(['bench', 'transport'], capsys, monkeypatch),
                                    '--duration')
    text = _help(['trace', 'gen'], capsys, monkeypatch)
    assert 'Write a seeded synthetic trace' in text
    text = _help(['trace', 'stats'], capsys, monkeypatch)
    assert 'FILE_OR_PRESET is a preset' in text and 'SOURCE' not in text
    for sub, positional in (('plot', 'FILE_OR_PRESET'), ('convert', 'FILE')):
        text = _help(['trace', sub], capsys, monkeypatch)
        line = next(x for x in text.split('positional arguments:')[1].splitlines() if x.strip())
        assert line.split()[0] == positional and len(line.split()) > 1, line


def test_sim_help_names_every_file_and_when_staleness_is_ignored(capsys, monkeypatch):
    text = _help(['sim'], capsys, monkeypatch)
    assert 'summary.json, timeseries.csv and events.csv' in _option(text, '--out')
    assert 'not both with different values' in _option(text, '--staleness')


def test_report_help_says_what_a_folder_of_runs_may_hold(capsys, monkeypatch):
    """Say that a row fed by two groups is refused and a seed run twice counts once."""
    text = ' '.join(_help(['report'], capsys, monkeypatch).split())
    assert ('Refused: a folder where one row (a system at one setting) would average runs of '
            'two comparisons, or of a comparison and runs outside it') in text
    assert 'get a row per system and setting' in text
    assert "A system's seed run twice below RUN_DIR counts once, the newest run" in text


def test_reproduce_seeds_help_says_the_seeds_each_paper_runs(capsys, monkeypatch):
    """Read each paper's default seeds off its runner, so that the help cannot drift."""
    import inspect
    import re
    from rog_ros.experiments.reproduce import REPRODUCTIONS
    text = _option(_help(['reproduce'], capsys, monkeypatch), '--seeds')
    found = re.search(r'default by PAPER: ([^)]*)\)', text)
    assert found, text
    said = {name: seeds for part in found.group(1).split('; ')
            for names, seeds in [part.split(': ')] for name in names.split(', ')}
    runs = {name: ','.join(map(str, inspect.signature(run).parameters['seeds'].default))
            for name, run in REPRODUCTIONS.items()}
    assert said == runs


def test_module_docstring_lists_every_command_the_parser_has():
    parser = cli.build_parser()
    commands = parser._subparsers._group_actions[0].choices
    for name, sub in commands.items():
        assert f'    rog {name} ' in cli.__doc__, name
        nested = [a for a in sub._actions if a.__class__.__name__ == '_SubParsersAction']
        if nested and name in ('bench', 'trace'):
            line = next(x for x in cli.__doc__.splitlines() if x.startswith(f'    rog {name} '))
            assert line.split()[2] == '|'.join(nested[0].choices), name


def test_sync_unknown_names_the_system_as_typed_and_lists_all(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    assert cli.main(['sim', '--sync', 'bogus']) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and "rog sim: --sync: unknown sync system 'bogus';" in err
    assert 'bogus:4' not in err
    for name in ('bsp', 'ssp', 'rog', 'flown', 'adacomp', 'comp-asgd', 'gsp+gds', 'asp'):
        assert f' {name},' in err or f' {name} ' in err or err.rstrip().endswith(name), name


def test_the_sample_fleet_file_lists_every_sync_the_fleet_runs():
    with open(os.path.join(ROOT, 'config', 'fleet.yaml'), encoding='utf-8') as fh:
        line = next(x for x in fh if x.strip().startswith('sync:'))
    listed = {w.strip() for w in line.split('#', 1)[1].split('|')}
    assert listed == {'rog', 'ssp', 'bsp', 'flown', *PUSH_SYSTEMS}


def _every_parser(parser, path=()):
    """Yield ``(path, parser)`` for ``parser`` and every subcommand under it."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _every_parser(sub, path + (name,))


def test_no_help_text_shows_escaped_percent_or_markup(monkeypatch):
    # argparse %-formats option help but not descriptions: a '%%' in a description is shown
    # as typed. Render every subcommand's help and look at what a user reads.
    monkeypatch.setenv('COLUMNS', '400')
    seen = 0
    for path, parser in _every_parser(cli.build_parser()):
        text = parser.format_help()
        assert '%%' not in text and '``' not in text, ' '.join(path)
        seen += 1
    assert seen > 20


def test_help_does_not_import_torch():
    # torch takes seconds to import (more on a Jetson): `rog --help` and every subcommand's
    # help must come without it. A fresh interpreter: this one has torch loaded already.
    code = ('import argparse, sys\n'
            'from rog_ros import cli\n'
            'def walk(p):\n'
            '    yield p\n'
            '    for a in p._actions:\n'
            '        if isinstance(a, argparse._SubParsersAction):\n'
            '            for s in a.choices.values():\n'
            '                yield from walk(s)\n'
            'n = sum(1 for p in walk(cli.build_parser()) if p.format_help())\n'
            "print(n, sorted(m for m in ('torch', 'cyclonedds') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.split(maxsplit=1)
    assert int(out[0]) > 20 and out[1].strip() == '[]', out


def test_rog_sim_ends_with_where_its_results_are_and_keeps_its_log_readable(tmp_path, capsys):
    # it ended at the JSON's closing brace, and its progress, redrawn with a carriage return,
    # was one long line in a log file (stderr is not a terminal here)
    out = tmp_path / 'sim'
    assert cli.main(['sim', '--workload', 'toy', '--workers', '2', '--iterations', '10',
                     '--out', str(out)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)['system'] == 'rog:4'          # scripts still get the JSON
    assert '\r' not in captured.err
    lines = captured.err.splitlines()
    assert lines[0].startswith('  t=     0.0s  iteration     0.0  accuracy ')
    assert lines[-3] == f'rog sim: done; {out / "summary.json"}'
    assert lines[-2].startswith('rog sim: time to target ') and lines[-2].endswith(
        ' s (simulated time)')
    assert lines[-1] == f'rog sim: plots and a report: rog report {out}'
    assert lines[-4].startswith('  t=') and ' iteration    10.0 ' in lines[-4]   # the end


def test_rog_sim_progress_redraws_one_line_on_a_terminal():
    """Drive the progress on a stream that says it is a terminal."""
    import io

    class Terminal(io.StringIO):
        """A text stream that says it is a terminal."""

        def isatty(self):
            """Say yes."""
            return True
    stream = Terminal()
    progress = cli_sim._SimProgress(stream)
    for i in range(3):
        progress(float(i), float(i), {'accuracy': 0.5})
    progress.close()
    assert stream.getvalue().count('\r') == 3 and stream.getvalue().endswith('accuracy 0.500\n')


def _numeric_options(parser):
    """
    Yield ``(action, setting or None)`` for each option of ``parser`` that takes a number.

    A number: a numeric setting's flag, or an option of the command's own typed or shown
    (metavar) as INT or FLOAT; so that an option added later without a range is caught.
    """
    from rog_ros.nodes import settings
    for action in parser._actions:
        setting = settings.BY_NAME.get(action.dest)
        if setting is not None and setting.kind not in (int, float):
            continue
        if setting is not None or action.type in (int, float) or \
                action.metavar in ('INT', 'FLOAT', 'N'):
            yield action, setting


@pytest.mark.parametrize('command', ['fleet', 'robot'])
def test_fleet_and_robot_help_state_every_numeric_range(command, capsys, monkeypatch):
    """Find a range, as the settings write it, in the help of each option taking a number."""
    # rog robot --help said no range for --server-timeout (its flag was built in robot.py
    # from the description alone), none for --rank and --respawn, and rog fleet none for
    # --timeout and --domain-id; the timeouts said [0, inf) though 0 is refused
    import re
    text = ' '.join(_help([command], capsys, monkeypatch).split())
    parser = cli.build_parser()._subparsers._group_actions[0].choices[command]
    pattern = r'Range ([\[(](?:-inf|-?[0-9.e+-]+), (?:inf|-?[0-9.e+-]+)[\])])\.'
    seen = []
    for action, setting in _numeric_options(parser):
        flag = action.option_strings[-1]
        assert action.metavar in ('INT', 'FLOAT'), flag
        said = text.split(f' {flag} {action.metavar} ', 1)[1].split(' --', 1)[0]
        found = re.search(pattern, said)
        assert found, (flag, said)
        if setting is not None:
            assert found.group(1) == setting.range_text(), flag
        seen.append(flag)
    if command == 'robot':
        assert {'--server-timeout', '--rank', '--respawn', '--workers'} <= set(seen)
        assert 'Range (0, inf).' in text.split(' --server-timeout FLOAT ', 1)[1]
    else:
        assert {'--timeout', '--domain-id', '--startup-timeout'} <= set(seen)
    assert len(seen) >= 20


def test_every_numeric_setting_accepts_exactly_the_range_its_help_states():
    """Check each bound: accepted where the range text includes it, refused past it."""
    # startup_timeout and server_timeout said [0, inf) and refused 0: the range is (0, inf)
    from rog_ros.checks import ConfigError
    from rog_ros.nodes import settings
    numeric = [s for s in settings.SETTINGS if s.kind in (int, float)]
    assert len(numeric) == 23
    opened = sorted(s.name for s in numeric if s.range_text().startswith('('))
    assert opened == ['server_timeout', 'startup_timeout']
    for s in numeric:
        assert s.range_text(), s.name
        step = 1 if s.kind is int else 1e-9 * max(1.0, abs(s.low or 0), abs(s.high or 0))
        if s.low is not None:
            with pytest.raises(ConfigError):
                s.check(s.kind(s.low - step))
            if s.name in opened:
                with pytest.raises(ConfigError):
                    s.check(s.kind(s.low))
            else:
                s.check(s.kind(s.low))
        if s.high is not None:
            s.check(s.kind(s.high))
            with pytest.raises(ConfigError):
                s.check(s.kind(s.high + step))
