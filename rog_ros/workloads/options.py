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
(``rog compare`` reuses a run only if its recorded options are equal). Where the builder's
default is a list, text is split at its commas (``known=clutter,pillars``, each item read as
the default's items are) and a single value is a list of one (``known=maze``).

The builders check ranges themselves (``integer``, ``number``, ``one_of`` below), before any
data is made: a kind is all a signature tells.
"""

from __future__ import annotations

import ast
import inspect
import math
import os

_SCALARS = (bool, int, float, str, type(None))


def parse(text: str) -> tuple[str, object]:
    """Return ``(key, value)`` of one ``KEY=VALUE``; ValueError says what is wrong."""
    key, eq, raw = text.partition('=')
    key = key.strip()
    if not eq or not key.isidentifier():
        raise ValueError(f'{text!r} is not KEY=VALUE (e.g. dataset=cifar100)')
    return key, _value(raw.strip())


def parse_raw(text: str) -> tuple[str, str]:
    """Return ``(key, the value's text as typed)`` of one ``KEY=VALUE`` (`parse` checks it)."""
    key, _, raw = text.partition('=')
    return key.strip(), raw.strip()


def _value(raw: str):
    """Read one option value: a literal of plain types where it is one, else the text."""
    if raw.lower() in ('true', 'false'):
        return raw.lower() == 'true'
    if raw.lower() in ('none', 'null'):
        return None
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return _home(raw)
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


def split_text(text) -> list:
    """
    Return the ``KEY=VALUE`` pairs of a fleet's ``workload_options`` text (``'a=1;b=x,y'``).

    Pairs are separated by semicolons (a comma stays inside its value: ``hidden=512,256``);
    empty pieces (a trailing ``;``) are dropped, and None or '' gives no pair.
    """
    return [piece.strip() for piece in str(text or '').split(';') if piece.strip()]


def from_text(workload: str, text) -> dict:
    """
    Return the options of a ``workload_options`` text, parsed and checked against the builder.

    Each pair is read as ``--workload-option`` reads it (:func:`parse_all`, :func:`check`);
    ValueError (one line) for a malformed pair, a key given twice, an unknown key or a value
    of the wrong kind.
    """
    pairs = split_text(text)
    options = parse_all(pairs)
    if options:
        try:
            check(workload, options, pairs)
        except KeyError as err:         # a plug-in's registry
            raise ValueError(err.args[0] if err.args else str(err)) from None
    return options


def text_error(text) -> str:
    """Say why a ``workload_options`` text has a malformed pair or a repeated key ('' if none)."""
    try:
        parse_all(split_text(text))
    except ValueError as err:
        return str(err)
    return ''


def check(workload: str, options: dict, texts=None) -> None:
    """
    Check ``options`` against the builder of ``workload``: names and kinds of values.

    A builder that takes ``**kwargs`` (a user's registered factory) accepts any name; a
    value is checked against the kind of the builder's default where it has one. Text or a
    single value given for a list option becomes that list in ``options``, once every option
    has passed (a refused option leaves ``options`` as it was). ``texts``: the ``KEY=VALUE``
    texts ``options`` were parsed from; a number given for a text option is then the text as
    typed (``data_dir=20261204``, a folder named by its date, was refused as not a text).
    """
    from rog_ros import workloads
    params = workloads.builder_parameters(workload)
    if params is None:
        return
    typed = dict(parse_raw(t) for t in texts or ())
    listed = {}
    for key, value in options.items():
        if key not in params:
            raise ValueError(f'{workload} takes no option {key!r}; it takes '
                             f'{", ".join(sorted(params))} (docs/workloads.md)')
        if (isinstance(params[key].default, str) and key in typed
                and isinstance(value, (int, float)) and not isinstance(value, bool)):
            value = listed[key] = _home(typed[key])
        as_list = _listed(value, params[key].default)
        why = _kind_mismatch(as_list, params[key].default)
        if why:
            raise ValueError(f'{key}={value!r}: {why}')
        if as_list is not value:
            listed[key] = as_list
    options.update(listed)


_ITEM_KINDS = {bool: 'true or false values', int: 'integers', float: 'numbers', str: 'texts'}


def _item_kind(default):
    """Return the one plain type of the items of a list default, or None (mixed or empty)."""
    kinds = {type(item) for item in default}
    return kinds.pop() if len(kinds) == 1 and next(iter(kinds), None) in _ITEM_KINDS else None


def _listed(value, default):
    """
    Return ``value`` as the list a list option takes, or unchanged where it is no such text.

    The command line gives ``known=clutter,pillars`` (not a Python literal: text) and
    ``hidden=512`` (an integer) where the documentation promises comma-separated lists.
    """
    if not isinstance(default, (tuple, list)) or value is None or isinstance(value, list):
        return value
    if not isinstance(value, str):
        return [value]
    items = [item.strip() for item in value.split(',')]
    if not all(items):
        return value                    # an empty item: refused as not a list
    kind = _item_kind(default)
    # each item as a single value would be read (``~/a,~/b``: both expanded, not the first)
    return [_home(item) if kind is str else _value(item) for item in items]


def _home(text: str) -> str:
    """Return ``text`` with a leading ``~`` expanded to the home folder, as a value is."""
    return os.path.expanduser(text) if text.startswith('~') else text


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
        item = _item_kind(default)
        ok = isinstance(value, list) and (item is None or all(
            _kind_mismatch(v, default[0]) is None and (item is not str or isinstance(v, str))
            for v in value))
        kind = 'a comma-separated list' + (f' of {_ITEM_KINDS[item]}' if item else '')
    else:
        return None
    return None if ok else f'expected {kind} (default {default!r})'


def integer(where: str, name: str, value, low: int, high: int) -> int:
    """Return ``value`` if it is an integer from ``low`` to ``high``; else say so (ValueError)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f'{where}: {name}={value!r}: expected an integer with '
                         f'{low} <= {name} <= {high}')
    return value


def number(where: str, name: str, value, low: float, high: float = math.inf, *,
           above: bool = False, below: bool = False) -> float:
    """
    Return ``value`` if it is a finite number from ``low`` to ``high``; else say so.

    ``above`` / ``below`` leave ``low`` / ``high`` themselves out of the range.
    """
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool)
          and math.isfinite(value) and (low < value if above else low <= value)
          and (value < high if below else value <= high))
    if not ok:
        upper = '' if high == math.inf else f' {"<" if below else "<="} {high}'
        raise ValueError(f'{where}: {name}={value!r}: expected a number with '
                         f'{low} {"<" if above else "<="} {name}{upper}')
    return value


def one_of(where: str, name: str, value, allowed) -> str:
    """Return ``value`` if it is one of ``allowed``; else name them (ValueError)."""
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f'{where}: {name}={value!r}: expected one of '
                         f'{", ".join(repr(a) for a in allowed)}')
    return value


def check_training(where: str, o: dict, batch_max: int) -> None:
    """
    Range-check the training options a pre-trained workload builder shares (``o``: its args).

    MPCOL and EACOL take the same pre-training and adaptation settings; one place checks them,
    so that the two cannot drift apart. ``batch_max`` bounds both batch sizes.
    """
    integer(where, 'pretrain_batch', o['pretrain_batch'], 1, batch_max)
    number(where, 'pretrain_lr', o['pretrain_lr'], 0, above=True)
    integer(where, 'batch_size', o['batch_size'], 1, batch_max)
    number(where, 'lr', o['lr'], 0, above=True)
    number(where, 'momentum', o['momentum'], 0, 1, below=True)
    number(where, 'target_fraction', o['target_fraction'], 0, 1)
    if o['target_accuracy'] is not None:
        number(where, 'target_accuracy', o['target_accuracy'], 0, 1)
    number(where, 'compute_time_s', o['compute_time_s'], 0, above=True)
    integer(where, 'seed', o['seed'], 0, 2 ** 32 - 1)
