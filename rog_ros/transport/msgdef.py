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
ROS 2 ``.msg`` parser: ``msg/*.msg`` -> :class:`MsgDef` (fields and constants).

The embedded transport must not need a ROS install, so it reads the package's own ``.msg``
files with this small parser instead of ``rosidl``. It supports what ROS 2 ``.msg`` files
support except ``wstring``: primitive types, ``string`` and ``string<=N``, unbounded ``T[]``,
bounded ``T[<=N]`` and fixed ``T[N]`` arrays, nested types ``pkg/Type`` (or ``Type`` from the
same package), constants ``TYPE NAME=VALUE`` and default values (parsed and ignored: they do
not change the wire format or the type hash).

``builtin_interfaces/Time`` and ``std_msgs/Header`` are defined here exactly as ROS 2 defines
them, so that messages may use them without a ROS install.
"""

from __future__ import annotations

from dataclasses import dataclass
import os
from pathlib import Path
import re
import sys

PACKAGE = 'rog_ros'

PRIMITIVES = (
    'bool', 'byte', 'char', 'int8', 'uint8', 'int16', 'uint16', 'int32', 'uint32',
    'int64', 'uint64', 'float32', 'float64', 'string',
)
"""Primitive ``.msg`` type names (``byte`` is IDL ``octet``, ``char`` is IDL ``uint8``)."""

WELL_KNOWN = {
    'builtin_interfaces/Time': 'int32 sec\nuint32 nanosec\n',
    'std_msgs/Header': 'builtin_interfaces/Time stamp\nstring frame_id\n',
}
"""External types our messages may use, with ROS 2's own definitions (fields only)."""

STANDARD_DIR = Path(__file__).resolve().parent / 'ros_interfaces'
"""Standard ROS 2 messages the nodes publish (``<pkg>/<Type>.msg``), not this package's own."""

_FIELD_RE = re.compile(
    r'^(?P<type>[A-Za-z][\w/]*)(?P<strbound><=\d+)?(?P<array>\[(?P<abound><=)?(?P<n>\d*)\])?'
    r'\s+(?P<name>[a-z][a-z0-9_]*)(?P<rest>.*)$')
_NAME_RE = re.compile(r'^(?!.*__)(?!.*_$)[a-z][a-z0-9_]*$')
_CONST_RE = re.compile(r'^[A-Z](?!.*__)[A-Z0-9_]*$')


class MsgParseError(ValueError):
    """A ``.msg`` file is malformed or uses something this parser does not support."""


@dataclass(frozen=True)
class FieldDef:
    """One field of a message."""

    name: str          # field name (lower_case)
    base: str          # primitive name, or 'pkg/Type' for nested messages
    array: str = ''    # '' scalar, 'sequence' (T[] / T[<=N]) or 'array' (T[N])
    bound: int = 0     # sequence: max length (0 = unbounded); array: fixed length
    str_bound: int = 0  # string<=N: N (0 = unbounded)

    @property
    def nested(self) -> bool:
        """Whether the element type is another message."""
        return '/' in self.base


@dataclass(frozen=True)
class ConstantDef:
    """One constant ``TYPE NAME=VALUE`` of a message (not part of the wire format)."""

    name: str
    base: str
    value: object


@dataclass(frozen=True)
class MsgDef:
    """A parsed message: its full name ``pkg/Type``, fields in wire order and constants."""

    name: str
    fields: tuple
    constants: tuple

    @property
    def package(self) -> str:
        """Return the package part of the name."""
        return self.name.split('/')[0]

    @property
    def short_name(self) -> str:
        """Return the type part of the name."""
        return self.name.split('/')[-1]


def _strip_comment(line: str) -> str:
    """Remove a ``#`` comment that is not inside a quoted string value."""
    quote = ''
    for i, ch in enumerate(line):
        if ch in '\'"':
            quote = '' if quote == ch else (quote or ch)
        elif ch == '#' and not quote:
            return line[:i]
    return line


def _constant_value(base: str, text: str):
    text = text.strip()
    if base == 'string':
        if len(text) >= 2 and text[0] == text[-1] and text[0] in '\'"':
            return text[1:-1]
        return text
    if base == 'bool':
        if text.lower() in ('true', '1'):
            return True
        if text.lower() in ('false', '0'):
            return False
        raise MsgParseError(f'bad bool constant {text!r}')
    if base.startswith('float'):
        return float(text)
    return int(text, 0)


def parse_msg(text: str, name: str) -> MsgDef:
    """Parse the text of a ``.msg`` file into a :class:`MsgDef` named ``pkg/Type``."""
    package = name.split('/')[0]
    fields, constants, seen = [], [], set()
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw).strip()
        if not line:
            continue
        where = f'{name}.msg:{lineno}'
        m = _FIELD_RE.match(line)
        const = re.match(r'^(\S+)\s+([A-Za-z]\w*)\s*=(.*)$', line)
        if const and _CONST_RE.match(const.group(2)):
            base = const.group(1)
            if base not in PRIMITIVES:
                raise MsgParseError(f'{where}: constant of non-primitive type {base!r}')
            constants.append(ConstantDef(const.group(2), base,
                                         _constant_value(base, const.group(3))))
            continue
        if not m:
            raise MsgParseError(f'{where}: cannot parse {raw.strip()!r}')
        base, fname = m.group('type'), m.group('name')
        if not _NAME_RE.match(fname):
            raise MsgParseError(f'{where}: invalid field name {fname!r}')
        if fname in seen:
            raise MsgParseError(f'{where}: duplicate field {fname!r}')
        seen.add(fname)
        if base not in PRIMITIVES:
            if '/' not in base:
                base = f'{package}/{base}'
            elif base.count('/') == 2 and base.split('/')[1] == 'msg':
                pkg, _, typ = base.split('/')
                base = f'{pkg}/{typ}'
        if m.group('strbound') and base != 'string':
            raise MsgParseError(f'{where}: <=N bound on non-string type {base!r}')
        rest = m.group('rest').strip()
        if rest.startswith('='):
            raise MsgParseError(f'{where}: constant names must be UPPER_CASE')
        array, bound = '', 0
        if m.group('array') is not None:
            n = m.group('n')
            if m.group('abound'):
                if not n:
                    raise MsgParseError(f'{where}: [<=] needs a bound')
                array, bound = 'sequence', int(n)
            elif n:
                array, bound = 'array', int(n)
            else:
                array = 'sequence'
        str_bound = int(m.group('strbound')[2:]) if m.group('strbound') else 0
        fields.append(FieldDef(fname, base, array, bound, str_bound))
    return MsgDef(name, tuple(fields), tuple(constants))


def msg_dir() -> Path:
    """
    Return the folder holding this package's ``*.msg`` files.

    Looked up in this order: ``$ROG_ROS_MSG_DIR``; ``rog_ros/msg`` inside the installed Python
    package (pip installs, via ``package_data``); ``msg/`` next to the ``rog_ros`` package (the
    source tree); ``share/rog_ros/msg`` under ``$AMENT_PREFIX_PATH`` entries and ``sys.prefix``
    (where ``rosidl_generate_interfaces`` installs them on a ROS 2 build).
    """
    here = Path(__file__).resolve().parent.parent  # .../rog_ros
    candidates = []
    if os.environ.get('ROG_ROS_MSG_DIR'):
        candidates.append(Path(os.environ['ROG_ROS_MSG_DIR']))
    candidates += [here / 'msg', here.parent / 'msg']
    prefixes = [p for p in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep) if p]
    prefixes += [sys.prefix]
    candidates += [Path(p) / 'share' / PACKAGE / 'msg' for p in prefixes]
    for cand in candidates:
        if cand.is_dir() and any(cand.glob('*.msg')):
            return cand
    raise FileNotFoundError(
        'rog_ros msg/*.msg not found; looked in: ' + ', '.join(str(c) for c in candidates))


def load_msg_defs(directory=None, standard: bool = False) -> dict:
    """
    Parse every ``*.msg`` of ``directory`` and the well-known types they use.

    ``directory`` defaults to :func:`msg_dir`; ``standard`` adds the standard ROS 2 messages
    of :data:`STANDARD_DIR` (``diagnostic_msgs/DiagnosticArray`` ...). Returns
    ``{'pkg/Type': MsgDef}`` with every nested type resolved.
    """
    directory = Path(directory) if directory is not None else msg_dir()
    defs = {}
    for path in sorted(directory.glob('*.msg')):
        name = f'{PACKAGE}/{path.stem}'
        defs[name] = parse_msg(path.read_text(encoding='utf-8'), name)
    if standard:
        for path in sorted(STANDARD_DIR.glob('*/*.msg')):
            name = f'{path.parent.name}/{path.stem}'
            defs[name] = parse_msg(path.read_text(encoding='utf-8'), name)
    pending = list(defs.values())
    while pending:
        msgdef = pending.pop()
        for fdef in msgdef.fields:
            if fdef.nested and fdef.base not in defs:
                if fdef.base not in WELL_KNOWN:
                    raise MsgParseError(f'{msgdef.name}: unknown type {fdef.base!r}')
                defs[fdef.base] = parse_msg(WELL_KNOWN[fdef.base], fdef.base)
                pending.append(defs[fdef.base])
    return defs
