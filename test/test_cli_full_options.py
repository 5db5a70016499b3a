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
Every parser of rog_ros takes long options in full only (``allow_abbrev`` off).

argparse completes a prefix by default: ``rog fleet --iter 400`` ran 400 iterations, and a
robot's script that says ``--work 3`` would start failing (ambiguous) or change meaning the
day an option that shares the prefix is added. So ``rog`` and every subcommand, recursively,
the node executables (``rog_server``, ``rog_worker``, ``netmon``) and every other parser in
the source (``python -m rog_ros....`` entry points) turn abbreviation off.
"""

import argparse
import ast
from pathlib import Path

import pytest
from rog_ros import cli
from rog_ros.nodes import netmon, rog_server, rog_worker

ROOT = Path(__file__).resolve().parent.parent
PARSER_CALLS = ('ArgumentParser', 'add_parser', '_OneLineParser')
"""Calls that make a parser (``add_parser`` of a subparsers action: its first argument is a
name); ``SettingsParser`` turns abbreviation off itself and is checked by the node tests."""


def _parsers(parser, path='rog'):
    """Yield ``(command path, parser)`` of ``parser`` and of its subcommands, recursively."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f'{path} {name}')


def _abbreviating_calls(source: str) -> list:
    """Return the line numbers of parser-making calls of ``source`` without allow_abbrev=False."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, 'id', None)
        if name not in PARSER_CALLS:
            continue
        if name == 'add_parser' and not (node.args and isinstance(node.args[0], ast.Constant)
                                         and isinstance(node.args[0].value, str)):
            continue        # one of rog_ros's own add_parser(subparsers) functions
        off = any(k.arg == 'allow_abbrev' and isinstance(k.value, ast.Constant)
                  and k.value.value is False for k in node.keywords)
        if not off:
            found.append(node.lineno)
    return found


def test_every_rog_command_takes_options_in_full_only():
    """Find allow_abbrev off on ``rog`` and on each of its subcommands, recursively."""
    # Execute
    walked = list(_parsers(cli.build_parser()))
    abbreviating = [path for path, parser in walked if parser.allow_abbrev]
    # Assert
    assert len(walked) > 20, [path for path, _ in walked]
    assert 'rog bench faults' in dict(walked) and 'rog trace convert' in dict(walked)
    assert not abbreviating, f'allow_abbrev=False missing on: {", ".join(abbreviating)}'


@pytest.mark.parametrize('module', (rog_server, rog_worker, netmon),
                         ids=('rog_server', 'rog_worker', 'netmon'))
def test_the_node_executables_take_options_in_full_only(module):
    """Build a node's parser (ros2 run, launch files, rog fleet's children): no abbreviation."""
    # Execute
    parser = module.build_parser()
    # Assert
    assert parser.allow_abbrev is False
    with pytest.raises(SystemExit):
        parser.parse_args(['--iter', '400'])


def test_every_parser_in_the_source_turns_abbreviation_off():
    """Read every parser-making call of rog_ros (entry points of python -m included)."""
    # Arrange
    files = sorted((ROOT / 'rog_ros').rglob('*.py'))
    # Execute
    missing = [f'{path.relative_to(ROOT)}:{line}' for path in files
               for line in _abbreviating_calls(path.read_text(encoding='utf-8'))]
    calls = _abbreviating_calls('import argparse\nargparse.ArgumentParser(prog="x")\n'
                                'subparsers.add_parser("x", help="y")\nadd_parser(sub)\n')
    # Assert
    assert calls == [2, 3], calls      # the check itself finds a parser that abbreviates
    assert not missing, f'parsers without allow_abbrev=False: {", ".join(missing)}'


@pytest.mark.parametrize('argv, full', (
    (['fleet', '--iter', '400'], '--iterations'),
    (['sim', '--system', 'adacomp'], '--systems'),
    (['trace', 'gen', 'indoors', '--out', 'x.csv', '--sca', '2'], '--scale'),
))
def test_an_abbreviated_option_is_refused_naming_the_full_one(argv, full, capsys):
    """Refuse a prefix of an option in one line (exit 2) that names the option in full."""
    # Execute
    with pytest.raises(SystemExit) as stop:
        cli.main(argv)
    said = capsys.readouterr().err.strip()
    # Assert
    assert stop.value.code == 2
    assert len(said.splitlines()) == 1, said
    assert 'unrecognized arguments' in said and f'did you mean {full}' in said, said
