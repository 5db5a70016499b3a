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
The lease and fragment size of the user's Cyclone DDS configuration, read as Cyclone reads them.

The nodes count their writers' unacknowledged bytes with the lease and the fragment size Cyclone
will use (``Discovery/LeaseDuration``, ``General/FragmentSize``): this reads them from
``$CYCLONEDDS_URI`` as Cyclone 0.10.x (the robots', ROS 2 Humble's) and 11.0.x (this venv's)
read them: its sources in order, element names as Cyclone matches them, another domain's
settings skipped, references and ``${...}`` expanded, numbers with units as glibc's ``sscanf``
reads them, and nothing where Cyclone refuses the configuration. The shipped configurations
and ``CYCLONEDDS_URI``'s sources are :mod:`rog_ros.transport.cyclone_config`'s.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import re
from typing import NamedTuple

from rog_ros.transport.cyclone_config import _host_of, _uri_sources, _XML_TAG, \
    domain_id_from_env, SERVER_PARTICIPANT_INDEX

_TAG_NAME = re.compile(r'</?\s*([^\s/>]+)')
_DURATION_UNITS = {'ns': 1, 'us': 10 ** 3, 'ms': 10 ** 6, 's': 10 ** 9, 'min': 60 * 10 ** 9,
                   'hr': 3600 * 10 ** 9, 'day': 86400 * 10 ** 9}
"""Cyclone's duration units (``unittab_duration``: ``10 s``, ``500ms``, ``1 min``), in ns."""
_LEASE_DEFAULT_UNIT = 10 ** 6
"""A LeaseDuration without a unit is in milliseconds (Cyclone's default for it, deprecated)."""
_LEASE_MAX_NS = 3600 * 10 ** 9
"""Longest LeaseDuration Cyclone takes (``uf_duration_ms_1hr``: 0 to 1 hr; no ``inf``)."""
_XML_SPACE = ' \t\v\r\n'
"""What Cyclone's XML parser trims from both ends of an element's text (``qq_isspace``)."""
_XML_REF = re.compile(r'&(?:#x([0-9a-fA-F]+)|#([0-9]+)|(lt|gt|amp|apos|quot));')
"""The references Cyclone's XML parser replaces (``unescape_insitu``): by number or name."""
_XML_NAMED = {'lt': '<', 'gt': '>', 'amp': '&', 'apos': "'", 'quot': '"'}
_XML_CDATA = re.compile(r'<!\[CDATA\[(.*?)\]\]>', re.S)
_EXPANSION_DEPTH = 20
"""How deeply Cyclone expands ``${X:-${Y:-...}}`` before it refuses the value."""


def lease_duration_s(uri: str | None = None) -> float | None:
    """
    Return the participant ``LeaseDuration`` that ``$CYCLONEDDS_URI`` (or ``uri``) sets, in s.

    The last one of its sources wins, as in Cyclone; None when none sets it (Cyclone's
    default, 10 s), a file cannot be read or the value is not a finite duration. The
    engines wait that long at the 4 MiB bound for an acknowledgement before a transfer's
    END (``transfer.BOUND_END_S``): a robot back within its lease is still matched. Read
    as Cyclone reads it (:func:`_configured`): element names in any case, comments left
    out, a ``Domain`` of another id than ``$ROS_DOMAIN_ID``'s skipped, and ``${VAR}``,
    ``${VAR:-default}`` in the value expanded. The number is read by the rules Cyclone reads
    every number with a unit by (:func:`_number_with_unit`), between 0 and 1 hr; a lease
    of 0 (which Cyclone takes) is None here too: no lease to wait for, the bound's 10 s
    stand. :func:`read_settings` reads it with the fragment size in one pass.
    """
    return read_settings(uri).lease_s


def _lease_s(text: str | None) -> float | None:
    """Return a LeaseDuration's text (expanded) as Cyclone reads it, in s; None: 0 or none."""
    ns = None if text is None else _number_with_unit(
        text, _DURATION_UNITS, _LEASE_DEFAULT_UNIT, 0, _LEASE_MAX_NS)
    return ns / 1e9 if ns else None


_MEMSIZE_UNITS = {'B': 1, 'KiB': 1 << 10, 'kB': 1 << 10, 'MiB': 1 << 20, 'MB': 1 << 20,
                  'GiB': 1 << 30, 'GB': 1 << 30}
"""Cyclone's memory-size units (``unittab_memsize``: a kB is 1024 bytes), case as written."""
_SCANF_INT = re.compile(r'[ \t\n\v\f\r]*([+-]?[0-9]+)')
"""A whole number as glibc's ``sscanf`` ``%lld`` takes it: white space, a sign, digits."""
_SCANF_FLOAT = re.compile(
    r'[ \t\n\v\f\r]*([+-]?)(?:0[xX](?:([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)'
    r'(?:[pP]([+-]?[0-9]*))?|\.)|(?!0[xX])([0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE]([+-]?[0-9]*))?)')
"""
A number as glibc's ``sscanf`` ``%lf`` takes it: decimal or C99 hexadecimal (``0x258``,
``0x1.2cp9``), an exponent marker without digits taken and worth nothing (``600e``: 600),
``0x.`` taken as 0 (``0x`` alone, ``0xg`` are no number: a leading ``0x`` is hexadecimal).
Infinities and NaN are left out: Cyclone refuses them as out of range.
"""
MAX_FRAGMENT_BYTES = 65535
"""Largest ``General/FragmentSize`` Cyclone takes (a 16-bit size, ``uf_memsize16``)."""


def fragment_size_bytes(uri: str | None = None) -> int | None:
    """
    Return the ``General/FragmentSize`` that ``$CYCLONEDDS_URI`` (or ``uri``) sets, in bytes.

    Cyclone counts each sample in a writer's history as its CDR plus 80 bytes per fragment of
    this size (``dds_whc.c``, ``whcn_size``), so the nodes count what they wrote to a robot
    with it (``transfer.PeerLink``). Read as :func:`lease_duration_s` reads the lease (the
    last source's, for our domain, references expanded), the value as Cyclone takes a memory
    size: a number, then a unit of ``B``, ``KiB``, ``kB``, ``MiB``, ``MB``, ``GiB``, ``GB``
    (case as written; none: bytes), a fraction rounded (:func:`_number_with_unit`). None
    when none sets it (Cyclone's default, 1344 B), a file cannot be read or the value is not
    one Cyclone takes, or is 0. :func:`read_settings` reads it with the lease in one pass.
    """
    return read_settings(uri).fragment_bytes


def _fragment_bytes(text: str | None) -> int | None:
    """Return a FragmentSize's text (expanded) as Cyclone reads it, in bytes; None: 0 or none."""
    size = None if text is None else _number_with_unit(
        text, _MEMSIZE_UNITS, 1, 0, MAX_FRAGMENT_BYTES)
    return size or None


class CycloneSettings(NamedTuple):
    """The settings of a Cyclone configuration the nodes' engines count with (None: unset)."""

    lease_s: float | None
    """``Discovery/LeaseDuration`` in s (:func:`lease_duration_s`)."""
    fragment_bytes: int | None
    """``General/FragmentSize`` in bytes (:func:`fragment_size_bytes`)."""


def read_settings(uri: str | None = None) -> CycloneSettings:
    """
    Return the lease and the fragment size ``$CYCLONEDDS_URI`` (or ``uri``) sets, read once.

    A node gives its engines both: each read opened the configuration's files and walked
    their tags again, twice at every node's start. One walk finds both elements
    (:func:`_configured`); each is read as :func:`lease_duration_s` and
    :func:`fragment_size_bytes` say.
    """
    found = _configured(uri, ('leaseduration', 'fragmentsize'))
    return CycloneSettings(_lease_s(found['leaseduration']),
                           _fragment_bytes(found['fragmentsize']))


def _number_with_unit(text: str, units: dict, default_unit: int, low: int,
                      high: int) -> int | None:
    """
    Return a number and its unit as Cyclone reads them, in the table's base unit; None: refused.

    One reader for every such setting, so a lease and a fragment size are read alike: the
    rules of Cyclone's ``uf_int64_unit`` (``src/core/ddsi/src/ddsi_config.c``, with
    ``lookup_multiplier``; ``units`` is its unit table, ``unittab_duration`` in ns or
    ``unittab_memsize`` in bytes). First a whole number (``_SCANF_INT``), then the unit
    after any spaces, its name as written; if that is no unit of the table, a number as
    ``%lf`` reads it (``_SCANF_FLOAT``) and the unit, rounded half away from zero. No unit
    at all: 0 stays 0, any other number is in ``default_unit`` (0: a unit is required).
    Nothing may follow the unit (the XML parser trims the element's text, an environment
    reference's value is not). Outside ``low``..``high`` the value is refused, as is one
    whose scaled magnitude reaches 2**63 (an infinity, NaN). ``inf`` is a word only some
    durations take (``uf_duration_inf``); LeaseDuration and FragmentSize do not.
    """
    match = _SCANF_INT.match(text)
    if match is not None:
        number = _scanf_int(match.group(1))
        multiplier = _unit_multiplier(text[match.end():], units, default_unit, number == 0)
        if multiplier:        # (a number past int64 is out of any range we are given)
            number *= multiplier
            return number if low <= number <= high else None
    match = _SCANF_FLOAT.match(text)
    if match is None:
        return None
    sign, hex_digits, hex_exp, digits, exp = match.groups()
    exp = (hex_exp if hex_digits else exp) or ''
    exp = exp if exp.lstrip('+-') else '0'       # (glibc: 'e' without digits is no exponent)
    try:
        value = float.fromhex(f'{sign}{hex_digits}p{exp}') if hex_digits else \
            float(f'{sign}{digits}e{exp}') if digits else float(f'{sign}0')    # ('0x.')
    except OverflowError:
        return None
    multiplier = _unit_multiplier(text[match.end():], units, default_unit, value == 0)
    scaled = abs(value) * float(multiplier) + 0.5
    if not multiplier or not scaled < 2.0 ** 63:
        return None
    number = int(scaled) * (-1 if value < 0 else 1)
    return number if low <= number <= high else None


def _scanf_int(digits: str) -> int:
    """
    Return a whole number's text (a sign, digits) as glibc's ``%lld`` reads it, in int64.

    Saturated past int64, as glibc does; leading zeros are nothing to it. ``int()`` of the
    text raised a ValueError past 4300 digits (Python's limit) out of a node's start, where
    Cyclone reads 4400 zeros and ``10 s`` as 10 s.
    """
    magnitude = digits.lstrip('+-').lstrip('0')
    value = int(magnitude or '0') if len(magnitude) < 20 else 1 << 63
    value = -value if digits.startswith('-') else value
    return max(-(1 << 63), min((1 << 63) - 1, value))


def _unit_multiplier(unit: str, units: dict, default_unit: int, is_zero: bool) -> int:
    """
    Return what the ``unit`` after a number multiplies it by; 0 where Cyclone finds no unit.

    Spaces before it are skipped (only spaces, as Cyclone does); none: 1 for a zero (0 needs
    no unit), else ``default_unit``; else its name as written in ``units``.
    """
    unit = unit.lstrip(' ')
    if not unit:
        return 1 if is_zero else default_unit
    return units.get(unit, 0)


def port_mapping(uri: str | None = None, domain_id: int | None = None) -> tuple:
    """
    Return ``(domain, base, domain gain, participant gain, unicast offset)`` of the port map.

    What ``$CYCLONEDDS_URI`` (or ``uri``) sets in ``Discovery/Ports`` and
    ``Discovery/ExternalDomainId`` for ``domain_id`` (``$ROS_DOMAIN_ID``'s when None), each
    Cyclone's default where not set: a participant of index i listens for unicast discovery at
    ``base + domain gain * domain + unicast offset + participant gain * i``. A worker robot
    lists the server node at that port; computed with the defaults, a user's ``PortBase``
    (the same file on every robot) sent each announcement to a port nobody listens on.
    """
    names = ('externaldomainid', 'portbase', 'domaingain', 'participantgain',
             'unicastmetaoffset')
    found = _configured(uri, names, domain_id)
    if domain_id is None:
        domain_id = domain_id_from_env()
    defaults = (domain_id, 7400, 250, 2, 10)
    out = []
    for name, default in zip(names, defaults):
        text = found[name]
        out.append(default if text is None or text.lower() == 'default'
                   or not re.fullmatch(r'[+-]?[0-9]+', text) else _scanf_u32(text))
    return tuple(out)


def discovery_port(domain_id: int, index: int, uri: str = '') -> int:
    """
    Return the unicast discovery (SPDP) port of participant ``index`` in ``domain_id``.

    As ``uri``'s port map gives it (:func:`port_mapping`; '': Cyclone's defaults, 7400 +
    250 d + 10 + 2 i).
    """
    return _mapped_port(uri, domain_id, index)[1]


def _mapped_port(uri: str | None, domain_id: int | None, index: int) -> tuple:
    """Return ``(domain, port)``: participant ``index``'s discovery port, as ``uri`` maps it."""
    domain, base, domain_gain, gain, offset = port_mapping(uri, domain_id)
    return domain, base + domain_gain * domain + offset + gain * int(index)


def taken_index(uri: str | None = None, domain_id: int | None = None) -> str | None:
    """
    Say why a participant with a fixed ``ParticipantIndex`` cannot be created; None: no reason.

    Cyclone refuses a participant whose fixed index another process of the host holds (its
    unicast discovery port bound): 11.0.1 says only ``DDS_RETCODE_ERROR`` (0.10.5 logs
    ``failed to create unicast sockets``). The server node takes one (a second server node
    of the domain on the host, a user's own index): the line names the index, the port and
    the fix.
    """
    taken = index_port_taken(uri, domain_id)
    if taken is None:
        return None
    index, domain, port = taken
    return (f'DDS participant index {index} of domain {domain} (UDP port {port}) is taken on '
            'this host: another process of the domain runs with it (a second server node? the '
            f'server node takes index {SERVER_PARTICIPANT_INDEX}); stop it first, or run this '
            'fleet on another ROS_DOMAIN_ID')


def index_port_taken(uri: str | None = None, domain_id: int | None = None) -> tuple | None:
    """
    Return ``(index, domain, port)`` when the fixed index ``uri`` sets has its port bound here.

    None when ``uri`` sets no fixed ``ParticipantIndex`` (Cyclone picks a free one) or its
    unicast discovery port can be bound on this host (by the mapping :func:`port_mapping`
    reads; an error other than "in use" is no answer, Cyclone will say). Bound as Cyclone
    binds it (``ddsi_udp_create_conn``: any address, no address reuse) in the address family
    of its transport (:func:`_udp_family`): IPv4, or IPv6 for ``General/Transport`` ``udp6``
    (or ``UseIPv6`` true), dual-stack as the host makes IPv6 sockets (``bindv6only``): an
    IPv4-only check missed a port an IPv6 socket held and Cyclone's ``udp6`` bind found taken.
    None for the transports without a UDP discovery port (``tcp``, ``tcp6``, ``raweth``).
    """
    import errno
    import socket
    found = _configured(uri, ('participantindex', 'transport', 'useipv6'), domain_id)
    text = found['participantindex']
    if text is None or not re.fullmatch(r'[0-9]+', text):
        return None                                  # auto, none, default: Cyclone picks
    family = _udp_family(found['transport'], found['useipv6'])
    if family is None:
        return None
    index = int(text)
    domain, port = _mapped_port(uri, domain_id, index)
    try:
        sock = socket.socket(family, socket.SOCK_DGRAM)
    except OSError:
        return None                                  # no IPv6 here: Cyclone will say
    try:
        sock.bind(('::' if family == socket.AF_INET6 else '', port))
    except OSError as exc:
        return (index, domain, port) if exc.errno == errno.EADDRINUSE else None
    finally:
        sock.close()
    return None


def _udp_family(transport: str | None, use_ipv6: str | None):
    """
    Return the address family of Cyclone's UDP sockets for these settings; None: not UDP.

    ``General/Transport`` (case-insensitive): ``udp`` IPv4, ``udp6`` IPv6; ``default`` (or
    unset) IPv6 only where the deprecated ``General/UseIPv6`` is true, as Cyclone maps it.
    """
    import socket
    kind = (transport or 'default').lower()
    if kind == 'default':
        kind = 'udp6' if (use_ipv6 or '').lower() == 'true' else 'udp'
    return {'udp': socket.AF_INET, 'udp6': socket.AF_INET6}.get(kind)


def _configured(uri: str | None, elements, domain_id: int | None = None) -> dict:
    """
    Return ``{element: value}``: what Cyclone takes for each of ``elements`` (lower case).

    From ``$CYCLONEDDS_URI``, or ``uri``, read once for all of them. The last such element
    of the sources, in order, for our domain, its text trimmed and its environment
    references expanded as Cyclone does (:func:`expand_env`); None when no source sets it,
    or its expansion fails, every one None at a ``Domain`` ``Id``, element or attribute
    Cyclone refuses (it refuses the configuration then; :func:`_setting_texts`). Unreadable
    files are passed over (Cyclone says why).
    """
    value = os.environ.get('CYCLONEDDS_URI', '') if uri is None else uri
    try:
        domain_id = domain_id_from_env() if domain_id is None else domain_id
    except ValueError:
        domain_id = None                    # (the node says so where it opens its domain)
    found = dict.fromkeys(elements)
    for is_file, source in _uri_sources(value):
        if is_file:
            try:
                with open(source, encoding='utf-8', errors='replace') as f:
                    source = f.read()
            except (OSError, ValueError):
                continue
        if not _setting_texts(source, domain_id, found, is_file):
            return dict.fromkeys(found)         # what Cyclone refuses refuses all
    for element, text in found.items():
        found[element] = None if text is None else expand_env(text.strip(_XML_SPACE),
                                                              domain_id)
    return found


def _xml_text(raw: str) -> str | None:
    """
    Return an element's text as Cyclone's parser hands it on; None where it refuses it.

    References replaced outside CDATA sections, whose text stands as it is (Cyclone 11.0.1
    reads ``&#54;00B`` and ``<![CDATA[600B]]>`` as 600 B); trimmed by the caller.
    """
    parts = _XML_CDATA.split(raw)           # text, CDATA, text, ... (comments gone)
    out = []
    for k, part in enumerate(parts):
        part = part if k % 2 else _xml_unescape(part)
        if part is None:
            return None
        out.append(part)
    return ''.join(out)


def _xml_unescape(text: str) -> str | None:
    """
    Return XML text with its references replaced, as Cyclone's parser does; None: refused.

    ``&lt;`` ``&gt;`` ``&amp;`` ``&apos;`` ``&quot;`` and ``&#N;``, ``&#xN;`` (at most 16
    characters after the ``&``, a Unicode code point); any other ``&`` is a parser error.
    """
    out, pos = [], 0
    while True:
        amp = text.find('&', pos)
        if amp < 0:
            return ''.join(out) + text[pos:]
        ref = _XML_REF.match(text, amp)
        if ref is None or ref.end() - amp > 17:
            return None
        hex_cp, dec_cp, name = ref.groups()
        code = None if name else int(hex_cp, 16) if hex_cp else int(dec_cp)
        if code is not None and code > 0x10FFFF:
            return None
        out.append(text[pos:amp] + (_XML_NAMED[name] if name else chr(code)))
        pos = ref.end()


def expand_env(value: str, domain_id: int | None = None, environ=None) -> str | None:
    """
    Return a Cyclone configuration ``value`` with its environment references expanded.

    Cyclone expands every element's text and attribute (``ddsrt_expand_envvars``, called by
    ``proc_update_cfgelem`` of ``ddsi_config.c``): ``${X}`` (empty when unset), ``${X:-Y}``
    (Y when X is unset or empty), ``${X:+Y}`` (Y when X is set and not empty, else empty),
    ``${X:?Y}`` (an error when X is unset or empty); Y is expanded in turn, and a ``$`` not
    followed by ``{`` stays as it is (``$X`` is not expanded). Unset, ``CYCLONEDDS_PID`` (and
    ``$``) is the process id and ``CYCLONEDDS_DOMAIN_ID`` the domain id ``domain_id``. None
    where Cyclone refuses the value: an unclosed or malformed reference, ``${X:?Y}`` with X
    unset or empty, references nested over 20 deep. File names in ``CYCLONEDDS_URI`` are
    opened as they are, unexpanded. ``environ``: the variables (default ``os.environ``).
    """
    env = os.environ if environ is None else environ
    return _expand(value, env, domain_id, 0)


def _expand(value: str, env, domain_id: int | None, depth: int) -> str | None:
    """Expand ``value`` at nesting ``depth`` (:func:`expand_env`); None: Cyclone refuses it."""
    if depth >= _EXPANSION_DEPTH:
        return None
    out, pos = [], 0
    while True:
        start = value.find('${', pos)
        if start < 0:
            return ''.join(out) + value[pos:]
        out.append(value[pos:start])
        end = start + 2
        while end < len(value) and value[end] not in ':}':
            end += 1
        if end >= len(value):
            return None                                  # unclosed
        name, op, alt = value[start + 2:end], None, None
        if value[end] == ':':
            if value[end + 1:end + 2] not in ('-', '+', '?'):
                return None                              # ${X:Y}
            op, end, nest = value[end + 1], end + 2, 0
            alt_start = end
            while end < len(value) and (value[end] != '}' or nest > 0):
                if value[end] == '{':
                    nest += 1
                elif value[end] == '}':
                    nest -= 1
                elif value[end] == '\\':
                    end += 1                             # (kept: Y is not unescaped)
                end += 1
            if end >= len(value):
                return None
            alt = value[alt_start:end]
        got = _env_value(name, env, domain_id)
        if op is None:
            part = got or ''
        elif op == '-':
            part = got if got else _expand(alt, env, domain_id, depth + 1)
        elif op == '+':
            part = _expand(alt, env, domain_id, depth + 1) if got else ''
        else:
            part = got or None                           # ${X:?message}: refused
        if part is None:
            return None
        out.append(part)
        pos = end + 1


def _env_value(name: str, env, domain_id: int | None) -> str | None:
    """Return what Cyclone looks up for ``name``: the variable, else its own two names."""
    if name in env:
        return env[name]
    if name in ('$', 'CYCLONEDDS_PID'):
        return str(os.getpid())
    if name == 'CYCLONEDDS_DOMAIN_ID' and domain_id is not None:
        return str(domain_id)
    return None


def _is_domain(attribute: str, domain_id: int) -> bool | None:
    """
    Return whether a ``Domain`` whose ``Id`` is ``attribute`` applies to ``domain_id``.

    None where Cyclone refuses the configuration (``uf_domainId`` of ``ddsi_config.c``): its
    references decoded and expanded (:func:`expand_env`), the value is ``any`` (any case, as
    written) or a number as ``sscanf``'s ``%u`` reads it with nothing after it
    (:func:`_scanf_u32`): ``'07'``, ``'+7'``, ``' 7'`` are domain 7 (the text compared with
    ``'7'`` skipped their settings), ``'-2'`` is 2**32 - 2. Refused (Cyclone 11.0.1):
    2**32 - 1, which ``'-1'`` and any number past 2**64 read as (they counted as another
    domain here, and one of 4301 digits raised a ValueError out of every node's configure),
    ``'default'``, ``'0x1'``, ``''``, ``'7 '``, ``' any'``, and a reference that cannot be
    decoded or expanded (the reader took the Domain's settings for the last three).
    """
    text = _xml_unescape(attribute)
    return None if text is None else _is_domain_text(text, domain_id)


def _is_domain_text(text: str, domain_id: int) -> bool | None:
    """Return :func:`_is_domain` of an ``Id`` already decoded (a ``Domain/Id`` element's)."""
    text = expand_env(text, domain_id)
    if text is None:
        return None
    if text.isascii() and text.lower() == 'any':
        return True
    number = _SCANF_INT.fullmatch(text)
    value = None if number is None else _scanf_u32(number.group(1))
    if value is None or value == (1 << 32) - 1:
        return None
    return value == domain_id


def _scanf_u32(digits: str) -> int:
    """
    Return a whole number's text (a sign, digits) as glibc's ``%u`` reads it, in uint32.

    As ``strtoul``: a magnitude past 2**64 - 1 saturates to it whatever the sign, a negative
    one is negated modulo 2**64; the assignment keeps the low 32 bits. Leading zeros are
    nothing to it; ``int()`` of the whole text raised a ValueError past 4300 digits.
    """
    magnitude = digits.lstrip('+-').lstrip('0')
    value = int(magnitude or '0') if len(magnitude) <= 20 else 1 << 64
    if value >= 1 << 64:
        value = (1 << 64) - 1
    elif digits.startswith('-'):
        value = -value
    return value % (1 << 32)


def _setting_texts(text: str, domain_id: int | None, found: dict, is_file: bool = False) -> bool:
    """
    Put in ``found`` the text of the last of each of its elements in ``text``, for our domain.

    That text as the parser hands it on (:func:`_xml_text`: references decoded, CDATA as it
    stands, comments left out; None where the parser refuses it), read once here where the walk
    decides whether it is blank. An element ``text`` does not set keeps its value. Walks the
    tags once, as Cyclone's parser does: a commented-out setting is no setting, a blank one (no
    text once its references are decoded, comments left out and white space trimmed) gives no
    value, so the one before it stands, and a ``Domain`` whose ``Id`` (expanded) is neither
    ``any`` nor ``domain_id`` does not apply, from there on where it is an ``Id`` element
    (moved to the attribute; another domain's after data set since the last element in
    ``CycloneDDS`` refuses the configuration, ``uf_domainId``). A setting counts only in its
    place (``LeaseDuration`` in ``CycloneDDS/Domain/Discovery``, ``FragmentSize`` in
    ``CycloneDDS/Domain/General``; :func:`_config_place`). False, at once, where Cyclone
    refuses the whole configuration: a ``Domain`` ``Id`` it refuses (:func:`_is_domain`), or an
    element or attribute that no build of Cyclone 0.10.x or 11.0.x knows on the way to those
    places (a file's top element other than ``CycloneDDS``; :data:`_CONFIG_CHILDREN`): the
    robots and ROS 2 Humble run 0.10.x, this venv 11.0.1, and a name only one of them knows
    must not drop the settings.
    """
    stack, start = [], None               # (element, skipped, place) per open element
    first, data = True, False             # data: set since the last element in CycloneDDS
    for match in _XML_TAG.finditer(text):
        closing = match.group(1)
        named = _TAG_NAME.match(match.group(0))
        if closing is None or named is None:
            continue                        # a comment, declaration or CDATA
        tag, name = named.group(1), named.group(1).lower()
        if closing:
            if stack and stack[-1][0] == name:
                if start is not None and not stack[-1][1]:
                    raw = re.sub(r'<!--.*?-->', '', text[start:match.start()], flags=re.S)
                    body = _xml_text(raw)
                    if body is None or body.strip(_XML_SPACE):    # (blank: no value)
                        setting = _PLACE_SETTINGS.get(stack[-1][2])
                        if setting in found:
                            found[setting] = body
                        if stack[-1][2] == 'cyclonedds/domain/id' and domain_id is not None:
                            applies = None if body is None else _is_domain_text(
                                body.strip(_XML_SPACE), domain_id)
                            if applies is None or (not applies and data):
                                return False    # refused, or another domain's after data
                            if not applies and len(stack) > 1:
                                stack[-2] = (stack[-2][0], True, stack[-2][2])
                            data = data or applies
                        else:
                            data = True
                stack.pop()
            start = None
            continue
        skipped = bool(stack) and stack[-1][1]
        place = None
        if not skipped:
            parent = stack[-1][2] if stack else _implicit_parent(tag, is_file, first)
            place = _config_place(parent, tag, not is_file)
            if place is False:
                return False                # an element Cyclone does not know: refused
            data = data and parent != 'cyclonedds'
            for attribute in _XML_ATTRIBUTE.finditer(match.group(0), named.end()):
                known = _config_attribute(place, attribute.group(1), not is_file)
                if known is False:
                    return False            # (one after an Id of another domain is not read)
                if known == 'id' and domain_id is not None:
                    applies = _is_domain(attribute.group(2) if attribute.group(3) is None
                                         else attribute.group(3), domain_id)
                    if applies is None:
                        return False
                    if not applies:
                        skipped = True
                        break
                data = True
        first = False
        if not match.group(2):
            stack.append((name, skipped, place))
            start = match.end()
    return True


_CONFIG_CHILDREN = {
    '': ('CycloneDDS',),
    'cyclonedds': ('Domain', '>General', '>Partitioning@partitions', '>Threads', '>Sizing',
                   '>Compatibility', '>Discovery', '>Tracing', '>Internal|Unsupported',
                   '>TCP@tcp', '>DDSSecurity@security', '>SSL@ssl', '>SharedMemory@shm',
                   '>DDSI2E|DDSI2'),
    'cyclonedds/domain': ('Id', 'General', 'Security|DDSSecurity@security',
                          'Partitioning@partitions', 'Threads', 'Sizing', 'Compatibility',
                          'Discovery', 'Tracing', 'Internal|Unsupported', 'TCP@tcp', 'SSL@ssl',
                          'SharedMemory@shm'),
    'cyclonedds/domain/discovery': (
        'Tag', 'ExternalDomainId', 'DSGracePeriod', 'Peers', 'ParticipantIndex',
        'MaxAutoParticipantIndex', 'SPDPMulticastAddress', 'SPDPInterval',
        'DefaultMulticastAddress', 'InitialLocatorPruneDelay@11', 'DiscoveredLocatorPruneDelay@11',
        'Ports', 'EnableTopicDiscoveryEndpoints@topic', 'LeaseDuration'),
    'cyclonedds/domain/discovery/ports': (
        'Base', 'DomainGain', 'ParticipantGain', 'MulticastMetaOffset', 'UnicastMetaOffset',
        'MulticastDataOffset', 'UnicastDataOffset'),
    'cyclonedds/domain/general': (
        'MulticastRecvNetworkInterfaceAddresses', 'Interfaces', 'AddrsetCosts@11',
        'ExternalNetworkAddress', 'ExternalNetworkMask', 'AllowMulticast', 'MulticastTimeToLive',
        'DontRoute', 'UseIPv6', 'Transport', 'EnableMulticastLoopback', 'MaxMessageSize',
        'MaxRexmitMessageSize', 'FragmentSize', 'RedundantNetworking', 'EntityAutoNaming'),
}
"""
The elements Cyclone knows on the way to our settings, in 0.10.x or 11.0.x, any build.

Cyclone 0.10.x (``ddsi_cfgelems.h``: ROS 2 Humble's ``rmw_cyclonedds``, the robots'
``cyclonedds`` 0.10.5) and 11.0.x (``ddsi__cfgelems.h``: this venv's 11.0.1), in their order,
aliases after ``|``; ``>``: moved (``CycloneDDS/Discovery`` is ``CycloneDDS/Domain/Discovery``,
``CycloneDDS/DDSI2E`` the ``Domain`` itself), with a warning. ``@`` names what the name needs
(:data:`_CYCLONE_BUILDS`): a build option (``TCP`` is always in 0.10.x and optional in 11.0.x,
``SharedMemory`` the other way round) or version 11 (``AddrsetCosts``, the two locator prune
delays). A name no build of either knows there refuses the configuration (0.10.x's
``Channels`` is in no build); what lies below the other elements is not judged here.
"""
_CYCLONE_BUILDS = tuple(
    frozenset(always + tuple(o for bit, o in enumerate(options) if k >> bit & 1))
    for always, options in ((('tcp',), ('ssl', 'shm', 'security', 'partitions', 'topic')),
                            (('11', 'shm'), ('tcp', 'ssl', 'security', 'partitions', 'topic')))
    for k in range(1 << len(options)))
"""
What each build of Cyclone 0.10.x and 11.0.x may know: its version and build options.

0.10.x: ``ENABLE_SSL``, ``ENABLE_SHM``, ``ENABLE_SECURITY``, ``ENABLE_NETWORK_PARTITIONS``,
``ENABLE_TOPIC_DISCOVERY``; 11.0.x: TCP, TCP_TLS (``SSL``), security, partitions, topic
discovery. The 0.10.5 wheel has TCP, partitions and topic discovery; the 11.0.1 wheel shared
memory, partitions and topic discovery.
"""
_CONFIG_ATTRIBUTES = {
    'cyclonedds': ('xmlns', 'xmlns:xsi', 'xsi:schemaLocation', 'xsi:noNamespaceSchemaLocation'),
    'cyclonedds/domain': ('Id',),
    'cyclonedds/domain/discovery': (), 'cyclonedds/domain/general': (),
    'cyclonedds/domain/discovery/leaseduration': (),
    'cyclonedds/domain/general/fragmentsize': (),
    'cyclonedds/domain/discovery/externaldomainid': (),
    'cyclonedds/domain/discovery/participantindex': (),
    'cyclonedds/domain/discovery/ports': (),
    **{f'cyclonedds/domain/discovery/ports/{name}': ()
       for name in ('base', 'domaingain', 'participantgain', 'unicastmetaoffset')},
}
"""The attributes Cyclone 0.10.x and 11.0.x know on those elements (the same in both)."""
_PLACE_SETTINGS = {'cyclonedds/domain/discovery/leaseduration': 'leaseduration',
                   'cyclonedds/domain/general/fragmentsize': 'fragmentsize',
                   'cyclonedds/domain/discovery/externaldomainid': 'externaldomainid',
                   'cyclonedds/domain/discovery/participantindex': 'participantindex',
                   'cyclonedds/domain/discovery/ports/base': 'portbase',
                   'cyclonedds/domain/discovery/ports/domaingain': 'domaingain',
                   'cyclonedds/domain/discovery/ports/participantgain': 'participantgain',
                   'cyclonedds/domain/discovery/ports/unicastmetaoffset': 'unicastmetaoffset',
                   'cyclonedds/domain/general/transport': 'transport',
                   'cyclonedds/domain/general/useipv6': 'useipv6'}
"""The setting Cyclone takes at each place (elsewhere a same-named element is no setting)."""
_XML_ATTRIBUTE = re.compile(r'(?<![^\s"\'])([^\s=/>"\']+)\s*=\s*(?:"([^"]*)"|\'([^\']*)\')')
"""
An attribute in an opening tag, its value as written (Cyclone's parser trims none).

Its name starts after white space or a quote: tried from within a run of other characters,
the scan took time quadratic in the run (a 20 kB run: 10 s).
"""


def _implicit_parent(tag: str, is_file: bool, first: bool) -> str:
    """
    Return the place a source's top element opens in, as Cyclone's ``proc_elem_open`` has it.

    A file's is the root (only ``CycloneDDS`` is known there). Inline XML's first element,
    unless it is ``CycloneDDS``, gets an implicit ``CycloneDDS`` put around it, and unless it
    is ``Domain``, an implicit ``Domain`` too: ``<Discovery>...`` inline is the Domain's.
    The same in 0.10.x and 11.0.x.
    """
    if is_file or not first or _same_name(tag, 'CycloneDDS'):
        return ''
    return 'cyclonedds' if _same_name(tag, 'Domain') else 'cyclonedds/domain'


def _same_name(name: str, known: str) -> bool:
    """Say whether ``name`` is ``known`` to ``strcasecmp``: ASCII letters in any case."""
    return name.isascii() and name.lower() == known.lower()


@functools.lru_cache(maxsize=1024)
def _config_place(parent: str | None, tag: str, partial: bool):
    """
    Return the place of element ``tag`` opened in ``parent``; None: not judged; False: refused.

    ``parent`` None (below an element not judged) or not in :data:`_CONFIG_CHILDREN` is not
    judged. Else ``tag`` is matched as :func:`_cyclone_match` does (a prefix too for inline
    XML, ``partial``): refused only where no build knows it. Where builds differ on what it
    is (inline ``<DD>`` in ``CycloneDDS``: ``DDSI2E``, or ambiguous with ``DDSSecurity``),
    the first one on the way to a setting is taken. Cached: a tag name repeats.
    """
    if parent is None or parent not in _CONFIG_CHILDREN:
        return None
    names = _CONFIG_CHILDREN[parent]
    places = []
    for k in _cyclone_match(names, tag, partial):
        primary = names[k].split('@')[0].split('|')[0]
        places.append(f'{parent}/{primary.lower()}'.lstrip('/') if not primary.startswith('>')
                      else 'cyclonedds/domain' + ('' if primary == '>DDSI2E'
                                                  else '/' + primary[1:].lower()))
    on_the_way = [p for p in places if p in _CONFIG_CHILDREN or p in _PLACE_SETTINGS]
    return (on_the_way or places or [False])[0]


def _config_attribute(place, name: str, partial: bool):
    """Return the attribute ``name`` of element ``place`` is (lower case); False: refused."""
    if place is None or place not in _CONFIG_ATTRIBUTES:
        return None
    names = _CONFIG_ATTRIBUTES[place]
    found = _cyclone_match(names, name, partial)
    return names[found[0]].lower() if found else False


def _cyclone_match(names, name: str, partial: bool) -> list:
    """
    Return the indexes of ``names`` some build of Cyclone matches ``name`` to; [] for none.

    As ``find_cfgelem_by_name`` and ``matching_name_index`` of ``ddsi_config.c`` (the same
    in 0.10.x and 11.0.x), in each build (:data:`_CYCLONE_BUILDS`) with the names it has: a
    name or alias in any case; else, for inline XML only (``partial``), the entry whose
    primary name ``name`` is the longest prefix of (``<Disc>`` is ``Discovery``, ``<Lease>``
    is ``LeaseDuration``), none where two tie (``<D>`` in ``CycloneDDS``); with aliases, a
    ``name`` longer than the primary name that starts with it matches it too
    (``InternalX``). A name one build does not know or finds ambiguous another may take
    (inline ``<A>`` in ``General`` is ``AllowMulticast`` in 0.10.x, ambiguous with
    ``AddrsetCosts`` in 11.0.x): the reader refuses only what every build refuses.
    """
    exact, prefixes = [], []
    for k, entry in enumerate(names):
        entry, _, needs = entry.lstrip('>').partition('@')
        aliases = [a for a in entry.split('|') if a]
        if any(_same_name(name, alias) for alias in aliases):
            exact.append((k, needs))
            continue
        primary = aliases[0]
        cut = min(len(name), len(primary)) if len(aliases) > 1 else len(name)
        if cut <= len(primary) and _same_name(name[:cut], primary[:cut]):
            prefixes.append((k, needs, cut))
    found = []
    conditional = any(needs for _, needs in exact) or any(needs for _, needs, _ in prefixes)
    for build in _CYCLONE_BUILDS if conditional else _CYCLONE_BUILDS[:1]:
        here = [k for k, needs in exact if not needs or needs in build]
        if not here and partial:
            cuts = [(cut, k) for k, needs, cut in prefixes if not needs or needs in build]
            longest = max(cuts)[0] if cuts else 0
            here = [k for cut, k in cuts if cut == longest]
            here = here if len(here) == 1 else []
        found.extend(k for k in here[:1] if k not in found)
    return sorted(found)


def server_peer(host: str, domain_id: int, uri: str = '') -> str:
    """
    Return the server robot's address as a unicast peer at the server node's port.

    Given without a port, Cyclone sends each announcement to the port of every participant
    index it could assign (0.10: 32 datagrams, 11: 33), each a frame on the air; with the port
    of the server node's fixed index (``SERVER_PARTICIPANT_INDEX``), one. Here, not in
    :mod:`.cyclone_config`, because the port is read from the configuration (``port_mapping``):
    mapped as the robot's configuration ``uri`` (its ``CYCLONEDDS_URI``) maps it: a user's
    ``Discovery/Ports`` or ``ExternalDomainId`` moves the server node's port as well (the same
    file on every robot); a port past 65535 leaves the host without one, as before. A
    ``host`` that already names a port is kept as given; an IPv6 literal gets its brackets.
    """
    host = host.strip()
    if ']:' in host or (not host.startswith('[') and _host_of(host) != host):
        return host                                  # [v6]:PORT or host:PORT given
    port = _mapped_port(uri, domain_id, SERVER_PARTICIPANT_INDEX)[1]
    if port > 65535:
        return host
    if ':' in host and not host.startswith('['):
        try:
            ipaddress.IPv6Address(host.split('%', 1)[0])
        except ValueError:
            return host                   # no address ('host:'): refused as the user wrote it
        host = f'[{host}]'                           # an IPv6 literal
    return f'{host}:{port}'
