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
Workload options typed on a command line: ``--workload-option KEY=VALUE``.

Why: the workloads take keyword options (EACOL on a local CIFAR-100 copy, another
corruption, MPCOL's map size, ...), and the simulator's commands passed only ``--model``
through, so reaching them meant writing Python. Each option is checked against the
builder's own signature before anything runs: an unknown key or a value of the wrong kind is
one line naming the option and what it takes, not a traceback from inside a run (``rog
compare`` would have failed all its runs one by one).

Values are read as Python literals where they are one (``1200``, ``1e-3``, ``true``,
``400,256`` or ``(400, 256)``) and as text otherwise (``cifar100``, ``~/data``, with ``~``
expanded); sequences become lists, so that the options survive a JSON round trip unchanged
(``rog compare`` reuses a run only if its recorded options are equal).
"""

from __future__ import annotations

import ast
import inspect
import os

_SCALARS = (bool, int, float, str, type(None))


def parse(text: str) -> tuple[str, object]:
    """Return ``(key, value)`` of one ``KEY=VALUE``; ValueError says what is wrong."""
    key, eq, raw = text.partition('=')
    key = key.strip()
    if not eq or not key.isidentifier():
        raise ValueError(f'{text!r} is not KEY=VALUE (e.g. dataset=cifar100)')
    return key, _value(raw.strip())


def _value(raw: str):
    """Read one option value: a literal of plain types where it is one, else the text."""
    if raw.lower() in ('true', 'false'):
        return raw.lower() == 'true'
    if raw.lower() in ('none', 'null'):
        return None
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return os.path.expanduser(raw) if raw.startswith('~') else raw
    plain = _plain(value)
    return raw if plain is _NOT_PLAIN else plain    # a dict, a set, bytes: the text it is


_NOT_PLAIN = object()


def _plain(value):
    """Return ``value`` with every tuple a list (as JSON gives it back), or ``_NOT_PLAIN``."""
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, (tuple, list)):
        items = [_plain(v) for v in value]
        return _NOT_PLAIN if any(v is _NOT_PLAIN for v in items) else items
    return _NOT_PLAIN


def parse_all(texts, taken=None) -> dict:
    """
    Parse every ``KEY=VALUE`` of ``texts`` into one dict.

    ``taken`` maps keys that other options already set to the option that set them
    (``{'model': '--model'}``); repeating a key there or in ``texts`` is an error.
    """
    options: dict = {}
    for text in texts or ():
        key, value = parse(text)
        if key in options:
            raise ValueError(f'{key} is given twice')
        if taken and key in taken:
            raise ValueError(f'{key} is set by {taken[key]} already; give it once')
        options[key] = value
    return options


def check(workload: str, options: dict) -> None:
    """
    Check ``options`` against the builder of ``workload``: names and kinds of values.

    A builder that takes ``**kwargs`` (a user's registered factory) accepts any name; a
    value is checked against the kind of the builder's default where it has one.
    """
    from rog_ros import workloads
    params = workloads.builder_parameters(workload)
    if params is None:
        return
    for key, value in options.items():
        if key not in params:
            raise ValueError(f'{workload} takes no option {key!r}; it takes '
                             f'{", ".join(sorted(params))} (docs/workloads.md)')
        why = _kind_mismatch(value, params[key].default)
        if why:
            raise ValueError(f'{key}={value!r}: {why}')


def _kind_mismatch(value, default) -> str | None:
    """Say why ``value`` cannot stand for an option whose default is ``default``, or None."""
    if default is inspect.Parameter.empty or default is None or value is None:
        return None
    if isinstance(default, bool):
        ok, kind = isinstance(value, bool), 'true or false'
    elif isinstance(default, int):
        ok, kind = isinstance(value, int) and not isinstance(value, bool), 'an integer'
    elif isinstance(default, float):
        ok, kind = (isinstance(value, (int, float)) and not isinstance(value, bool),
                    'a number')
    elif isinstance(default, str):
        # a text option may also take a list (EACOL's corruption: a preset or pairs)
        ok, kind = isinstance(value, (str, list)), 'a text'
    elif isinstance(default, (tuple, list)):
        ok, kind = isinstance(value, list), 'a comma-separated list'
    else:
        return None
    return None if ok else f'expected {kind} (default {default!r})'
