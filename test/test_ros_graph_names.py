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
The ROS 2 node names that the docs, parameter files and SROS2 files use are the nodes' own.

ROS 2 cannot be installed here, so nothing runs ROS 2: the launch files are loaded against
stand-in ``launch`` / ``launch_ros`` modules, each ``Node(name=..., namespace=...)`` they
build is turned into the command line launch_ros gives it (``--ros-args -r __node:=NAME``,
``-r __ns:=/NS`` for a namespace or an enclosing ``PushRosNamespace``), and that command line
is resolved by the node's own parser (``rog_ros.nodes.ros_names``, rcl's rules) into the fully
qualified name the node takes in the graph. Against those names:

* every ``ros2 lifecycle``, ``ros2 param``, ``ros2 node info`` and ``ros2 service`` command,
  and every node a ``ros2 node list`` line lists, in the docs, images and code comments;
* every section of config/*.yaml (taken by at least one node the launch files start);
* the SROS2 enclaves docs/security.md names and the grants of config/sros2/ (the nodes'
  parameter and lifecycle services under their fully qualified names).
"""

from __future__ import annotations

import contextlib
import fnmatch
import importlib
import importlib.util
from pathlib import Path
import re
import sys

from launch_stand_ins import stand_in_modules
import pytest
from rog_ros.nodes import keystore, plan, settings
from rog_ros.nodes.ros_names import NAMESPACE, qualified
from test_docs_commands import install_docs_workload

ROOT = Path(__file__).resolve().parent.parent
TEXTS = tuple(['README.md', 'docker/README.md', 'docker/entrypoint.sh'] +
              sorted(str(p.relative_to(ROOT)) for p in (ROOT / 'docs').glob('*.md')) +
              sorted(str(p.relative_to(ROOT)) for p in (ROOT / 'rog_ros').rglob('*.py')) +
              sorted(str(p.relative_to(ROOT)) for p in (ROOT / 'launch').glob('*.py')))
"""Files whose ``ros2 ...`` commands are checked (docs, the images, docstrings, comments)."""
COMMAND = re.compile(r'ros2\s+(lifecycle\s+(?:get|set|list)|param\s+(?:get|set|list|describe'
                     r'|dump|load|delete)|node\s+info|service\s+(?:call|type))\s+([^\s`]+)'
                     r'(?:\s+([^\s`]+))?')
NODE_LIST = re.compile(r'ros2\s+node\s+list')
RUN = re.compile(r'ros2\s+run\s+rog_ros\s+(rog_server|rog_worker|netmon)'
                 r'((?:[^\S\n]+[^\s`|#(),]+)*)')
LAUNCH = re.compile(r'ros2\s+launch\s+rog_ros\s+(\w+)\.launch\.py((?:[^\S\n]+[^\s`|#()\\]+'
                    r'|[^\S\n]+\\\n)*)')
LISTED = re.compile(r'(?<![\w/])((?:/[A-Za-z_]\w*)+)(?:\.\.(\d+))?')
PUNCTUATION = '\'",.;:)'
ROBOTS = 3
"""Workers of the fleets below (the docs' robots: three)."""
LAUNCHES = tuple([('robot.launch', (('role', 'server'), ('workers', str(ROBOTS))))] +
                 [('robot.launch', (('role', 'worker'), ('rank', str(k)),
                                    ('workers', str(ROBOTS)))) for k in range(ROBOTS)] +
                 [(name, (('workers', str(ROBOTS)),))
                  for name in ('fleet.launch', 'mpcol.launch', 'eacol.launch')])
"""Launch files and arguments whose nodes make up the names the docs may use."""
SHOWN_WRONG = ('ros2 param get rog_server staleness',
               'ros2 lifecycle set rog_worker_1 deactivate')
"""Commands the docs show failing: a name without its namespace (robots.md, troubleshooting)."""
LIFECYCLE_NODES = (settings.SERVER, settings.WORKER)
"""Executables that are managed (lifecycle) nodes; netmon is a plain node."""


def launch_ros_argv(node: dict, pushed: str | None = None) -> list:
    """
    Return the arguments launch_ros gives ``Node(**node)`` under ``PushRosNamespace(pushed)``.

    As launch_ros's ``Node`` (``actions/node.py``): ``arguments``, then ``--ros-args`` and
    ``ros_arguments`` (before the name: rcl's first matching rule wins), then ``--ros-args
    -r __node:=NAME`` for a ``name``, and ``-r __ns:=`` for the namespace whenever a
    ``namespace`` (even ``''``: the root) or a pushed one is given: ``prefix_namespace(pushed,
    namespace)`` made absolute (``utilities/namespace_utils.py``).
    """
    ns = node.get('namespace')
    if ns is None:
        ns = pushed
    elif pushed and not ns.startswith('/'):
        ns = ('' if pushed == '/' else pushed) + '/' + ns
    if ns is not None:
        ns = ns if ns == '/' else ns.rstrip('/')
        ns = ns if ns.startswith('/') else '/' + ns
    ros = ['-r', f'__node:={node["name"]}'] if node.get('name') is not None else []
    if ns is not None:
        ros += ['-r', f'__ns:={ns}']
    extra = list(node.get('ros_arguments') or ())
    return list(node.get('arguments') or ()) + (['--ros-args'] + extra if extra else []) + \
        ['--ros-args'] + ros


def node_fqn(executable: str, argv: list) -> str:
    """Return the fully qualified name node ``executable`` takes, started with ``argv``."""
    module = importlib.import_module(f'rog_ros.nodes.{executable}')
    args = module.build_parser().parse_args(argv)
    return qualified(args.node_namespace, args.node_name)


@contextlib.contextmanager
def launch_loader():
    """Yield a loader: launch file and arguments -> ``[(executable, Node kwargs, fqn)]``."""
    with pytest.MonkeyPatch.context() as patch:
        for name, module in stand_in_modules().items():
            patch.setitem(sys.modules, name, module)
        launching = importlib.reload(importlib.import_module('rog_ros.nodes.launching'))

        def load(name: str, values: dict, pushed: str | None = None) -> list:
            """Load launch file ``name`` with ``values``; return its nodes and their names."""
            spec = importlib.util.spec_from_file_location(name, ROOT / 'launch' / f'{name}.py')
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            entities = module.generate_launch_description()
            declared = {e.args[0] for e in entities
                        if type(e).__name__ == 'DeclareLaunchArgument'}
            unknown = sorted(set(values) - declared)
            if unknown:                     # ros2 launch would ignore it without a word
                raise ValueError(f'{name}.py declares no argument {unknown}')
            opaque = [e for e in entities if type(e).__name__ == 'OpaqueFunction'][0]
            nodes = [e.kwargs for e in opaque.kwargs['function'](dict(values))
                     if type(e).__name__ == 'Node']
            return [(n['executable'], n, node_fqn(n['executable'], launch_ros_argv(n, pushed)))
                    for n in nodes]

        try:
            yield load
        finally:                        # the real launching module again (no ROS 2 here)
            patch.undo()
            importlib.reload(launching)


@pytest.fixture(scope='module')
def launched():
    """Return :func:`launch_loader`'s loader for this module's tests."""
    with launch_loader() as load:
        yield load


@pytest.fixture(scope='module')
def known(launched) -> dict:
    """Return ``{fqn: executable}`` of every node the docs' launches start."""
    out = {}
    for name, values in LAUNCHES:
        for executable, _, fqn in launched(name, dict(values)):
            out[fqn] = executable
    return out


def _placeholders(token: str) -> str:
    """Give a name's placeholders a value: ``rog_worker_<K>``, ``rog_worker_K`` -> ``_0``."""
    token = re.sub(r'(?<=_)<[^<>]+>', '0', token)
    return re.sub(r'_[KNR]\b', '_0', token)


def ros2_commands() -> list:
    """Return ``(where, command, node or service name, parameter)`` of every checked command."""
    out = []
    for path in TEXTS:
        text = (ROOT / path).read_text()
        if path.endswith('.py'):        # 'one string ' 'literal': as one text, lines kept
            text = re.sub(r"'(\s*\n\s*)'", r'\1', text)
        for match in COMMAND.finditer(text):
            where = f'{path}:{text.count(chr(10), 0, match.start()) + 1}'
            verb = ' '.join(match.group(1).split())
            if match.group(2) == '...':      # elided: ``ros2 param set ... diagnostics_hz``
                continue
            name = _placeholders(match.group(2).rstrip(PUNCTUATION))
            param = (match.group(3) or '').rstrip(PUNCTUATION)
            if ' '.join(match.group(0).split()) not in SHOWN_WRONG:
                out.append((where, verb, name, param))
    return out


def listed_nodes() -> list:
    """Return ``(where, fqn)`` of the nodes the docs say ``ros2 node list`` shows."""
    out = []
    for path in TEXTS:
        for number, line in enumerate((ROOT / path).read_text().splitlines(), 1):
            found = NODE_LIST.search(line)
            if not found:
                continue
            rest = re.split(r'\.\s|\||\(', line[found.end():])[0]     # this sentence / cell
            for match in LISTED.finditer(rest):
                name, last = match.group(1), match.group(2)
                if last is None:
                    out.append((f'{path}:{number}', name))
                    continue
                base = re.sub(r'\d+$', '', name)
                first = int(name[len(base):])
                out += [(f'{path}:{number}', f'{base}{k}') for k in range(first, int(last) + 1)]
    return out


def test_launched_nodes_are_named_in_the_fleet_namespace(launched):
    # Execute
    server = launched('robot.launch', {'role': 'server', 'workers': '3'})
    worker = launched('robot.launch', {'role': 'worker', 'rank': '2', 'workers': '3'})
    fleet = launched('fleet.launch', {'workers': '2'})
    # Assert: launch_ros's __node:= is the node's own name; no __ns:=, so the fleet namespace
    assert [fqn for _, _, fqn in server] == ['/rog/rog_server', '/rog/netmon']
    assert [fqn for _, _, fqn in worker] == ['/rog/rog_worker_2', '/rog/netmon_2']
    assert [fqn for _, _, fqn in fleet] == ['/rog/rog_server', '/rog/rog_worker_0',
                                            '/rog/rog_worker_1', '/rog/netmon']
    assert all('namespace' not in node for _, node, _ in server + worker + fleet)


def test_launch_namespace_arguments_move_the_nodes_as_the_docs_say(launched):
    # Execute: namespace:= (the fleet's), an enclosing PushRosNamespace (the graph's only)
    lab = launched('robot.launch', {'role': 'worker', 'rank': '1', 'workers': '3',
                                    'namespace': '/lab2'})
    pushed = launched('robot.launch', {'role': 'server', 'workers': '3'}, pushed='robot1')
    # Assert
    assert [fqn for _, _, fqn in lab] == ['/lab2/rog_worker_1', '/lab2/netmon_1']
    assert [fqn for _, _, fqn in pushed] == ['/robot1/rog_server', '/robot1/netmon']


@pytest.mark.parametrize('node, pushed, fqn', [
    # launch_ros puts ros_arguments before its own -r __node:=, and rcl's first rule wins
    ({'name': 'rog_server', 'ros_arguments': ['-r', '__node:=arm']}, None, '/rog/arm'),
    # namespace='' is the root, not "no namespace" (make_namespace_absolute(''))
    ({'name': 'rog_server', 'namespace': ''}, None, '/rog_server'),
    ({'name': 'rog_server', 'namespace': ''}, 'robot1', '/robot1/rog_server'),
    ({'name': 'rog_server', 'namespace': 'arm'}, '/', '/arm/rog_server'),
    ({'name': 'rog_server', 'namespace': '/arm/'}, 'robot1', '/arm/rog_server'),
    ({'name': 'rog_server'}, '/robot1/', '/robot1/rog_server'),
    ({'name': 'rog_server'}, None, '/rog/rog_server'),
])
def test_launch_ros_command_lines_are_resolved_as_launch_ros_builds_them(node, pushed, fqn):
    # Prepare: launch_ros's Node(...) and PushRosNamespace, as actions/node.py builds them
    node = dict(node, executable='rog_server')
    # Execute
    argv = launch_ros_argv(node, pushed)
    # Assert
    assert node_fqn('rog_server', argv) == fqn, argv


def test_the_checked_texts_hold_ros2_commands_of_every_kind():
    # a scan that finds nothing would pass every check below
    verbs = {verb.split()[0] + ' ' + verb.split()[1] for _, verb, _, _ in ros2_commands()}
    assert {'lifecycle get', 'lifecycle set', 'param get', 'param set', 'node info'} <= verbs
    assert len(listed_nodes()) >= 8
    assert {executable for _, executable, _ in ros2_runs()} >= {'rog_worker', 'netmon'}
    assert {name for _, name, _ in ros2_launches()} == {'robot.launch', 'fleet.launch',
                                                        'mpcol.launch', 'eacol.launch'}


@pytest.mark.parametrize('where, verb, name, param', ros2_commands())
def test_ros2_command_names_a_node_by_its_fully_qualified_name(known, where, verb, name,
                                                               param):
    # Prepare: a service is named under its node (/rog/rog_server/get_parameters)
    node = name.rsplit('/', 1)[0] if verb.startswith('service') else name
    # Assert
    assert node.startswith('/'), (
        f'{where}: ros2 {verb} {name}: ROS 2 tools take a relative name as one in / and find '
        f'no node; the nodes are in the fleet namespace: /rog/{node.lstrip("/")}')
    assert node in known, f'{where}: ros2 {verb} {name}: no node of ours is named {node}; ' \
        f'the launch files start {sorted(known)}'
    executable = known[node]
    if verb.startswith('lifecycle') or name.endswith(('/change_state', '/get_state')):
        assert executable in LIFECYCLE_NODES, f'{where}: {node} is no managed (lifecycle) node'
    if verb in ('param get', 'param set', 'param describe') and not param.startswith('-'):
        accepted = {s.name for s in settings.for_role(executable)}
        assert param in accepted, f'{where}: {node} has no parameter {param!r}'
        assert verb != 'param set' or param in settings.RUNTIME_SETTABLE, \
            f'{where}: {param} is read-only while the node runs'


def ros2cli_lookup(verb: str, name: str) -> str:
    """
    Return the node name ``ros2 VERB NAME`` looks up, as ros2cli does.

    ``ros2 param`` and ``ros2 lifecycle`` put a ``/`` before a relative name
    (``ros2node.api.get_absolute_node_name``); ``ros2 node info`` compares it as given.
    """
    if verb.split()[0] in ('param', 'lifecycle') and not name.startswith('/'):
        return '/' + name
    return name


def shown_wrong() -> list:
    """Return ``(where, command, the docs' words around it)`` of each failing command shown."""
    out = []
    for path in TEXTS:
        if not path.endswith('.md'):
            continue
        text = (ROOT / path).read_text()
        blocks = [b for p in text.split('\n\n')
                  for b in (p.splitlines() if p.startswith('|') else [p])]
        for block in blocks:
            flat = ' '.join(block.split())
            out += [(path, command, flat) for command in SHOWN_WRONG if command in flat]
    return out


def test_the_docs_say_which_name_a_failing_ros2_command_looks_for(known):
    # Prepare
    found = shown_wrong()
    assert {command for _, command, _ in found} == set(SHOWN_WRONG)
    for where, command, words in found:
        verb, name = ' '.join(command.split()[1:3]), command.split()[3]
        # Execute
        looked_up = ros2cli_lookup(verb, name)
        # Assert: it fails (no node of that name), and the docs name what it looks for
        assert looked_up not in known, command
        assert f'`{looked_up}`' in words, f'{where}: {command} looks for {looked_up}: {words}'
        assert 'as it is' not in words and 'bare name' not in words, \
            f'{where}: ros2 {verb} puts a / before a relative name: {words}'


@pytest.mark.parametrize('where, name', listed_nodes())
def test_ros2_node_list_shows_the_nodes_the_docs_list(known, where, name):
    assert name in known, f'{where}: ros2 node list shows no {name}; it shows {sorted(known)}'


def ros2_runs() -> list:
    """Return ``(where, executable, argv)`` of every ``ros2 run rog_ros NODE ...`` shown."""
    out = []
    for path in TEXTS:
        text = (ROOT / path).read_text()
        for match in RUN.finditer(text):
            argv = [a for a in match.group(2).split() if a != '...']   # ... : options left out
            if any('$' in a or a.isupper() for a in argv):     # ARGS, "${args[@]}": the user's
                continue
            out.append((f'{path}:{text.count(chr(10), 0, match.start()) + 1}', match.group(1),
                        argv))
    return out


@pytest.mark.parametrize('where, executable, argv', ros2_runs())
def test_ros2_run_command_starts_a_node_the_docs_name(known, where, executable, argv,
                                                      monkeypatch, tmp_path):
    # Prepare: files it names (--record-trace link.csv) are checked where it would run
    monkeypatch.chdir(tmp_path)
    # Execute: the node's own parser, as ros2 run starts it (a usage error exits 2)
    fqn = node_fqn(executable, argv)
    # Assert
    assert fqn in known, f'{where}: ros2 run rog_ros {executable} {" ".join(argv)} starts ' \
        f'{fqn}, which the launches do not: {sorted(known)}'


def ros2_launches() -> list:
    """Return ``(where, launch file, {argument: value})`` of every ``ros2 launch`` shown."""
    out = []
    for path in TEXTS:
        text = (ROOT / path).read_text()
        for match in LAUNCH.finditer(text):
            words = match.group(2).replace('\\\n', ' ').split()
            if not words or any('$' in w or w.isupper() for w in words):
                continue            # prose naming the file; ARGS, "${args[@]}": the user's
            values = dict(w.split(':=', 1) for w in words if ':=' in w)
            values = {k: '1' if v == 'K' else v.strip("'") for k, v in values.items()}
            out.append((f'{path}:{text.count(chr(10), 0, match.start()) + 1}',
                        f'{match.group(1)}.launch', values))
    return out


@pytest.mark.parametrize('where, name, values', ros2_launches())
def test_ros2_launch_command_starts_nodes_the_docs_name(launched, known, where, name, values,
                                                        monkeypatch):
    # Prepare: docs/workloads.md's own workload, importable as the docs have it installed
    install_docs_workload(monkeypatch)
    # Execute: the launch file with the arguments shown, its nodes resolved as they start
    names = [fqn for _, _, fqn in launched(name, values)]
    # Assert
    assert names and set(names) <= set(known), f'{where}: {name} starts {names}'


def sections_no_node_takes(sections: dict, nodes) -> list:
    """Return the sections of a parameter file's ``sections`` that none of ``nodes`` takes."""
    probe = '__probe__'
    left = []
    for key in sections:
        one = {key if key == plan.ALL_NODES else key.lstrip('/'): {probe: 1}}
        if not any(probe in settings.section_values(one, executable, fqn.rsplit('/', 1)[1], fqn)
                   for executable, fqn in nodes):
            left.append(key)
    return left


@pytest.mark.parametrize('name', sorted(p.name for p in (ROOT / 'config').glob('*.yaml')))
def test_every_parameter_file_section_is_taken_by_a_node(launched, name):
    # Prepare: the nodes the file serves (its own launch file, else fleet and robot launches)
    import yaml
    path = ROOT / 'config' / name
    launch = f'{path.stem}.launch' if (ROOT / 'launch' / f'{path.stem}.launch.py').is_file() \
        else 'fleet.launch'
    cases = [(launch, {'config': str(path), 'workers': str(ROBOTS)})] + \
        [('robot.launch', dict(values, config=str(path))) for launch_name, values in LAUNCHES
         if launch_name == 'robot.launch']
    nodes = [(executable, fqn) for case, values in cases
             for executable, _, fqn in launched(case, values)]
    # Execute
    sections = yaml.safe_load(path.read_text())
    # Assert: the launches take it (only /** and executable sections) and every section applies
    plan.resolve(plan.load_parameter_file(path))
    assert sections_no_node_takes(sections, nodes) == []


PROBE_HZ = 7.5
"""A ``diagnostics_hz`` no file and no default has: a section it reaches was applied."""


@pytest.mark.parametrize('name', sorted(p.name for p in (ROOT / 'config').glob('*.yaml')))
def test_a_node_given_the_parameter_file_takes_its_section(name, tmp_path):
    # Prepare: each node as ros2 run starts it with --ros-args --params-file config/NAME; a
    # copy whose executable sections also set diagnostics_hz tells a section taken from one
    # left out (most values in the files are the defaults: equal either way)
    import yaml
    sections = yaml.safe_load((ROOT / 'config' / name).read_text())
    probed = {key: ({'ros__parameters': dict(body.get('ros__parameters') or {},
                                             diagnostics_hz=PROBE_HZ)}
                    if key in ('rog_server', 'rog_worker', 'netmon') else body)
              for key, body in sections.items()}
    assert settings.defaults('netmon')['diagnostics_hz'] != PROBE_HZ
    for path in (str(ROOT / 'config' / name), str(tmp_path / name)):
        (tmp_path / name).write_text(yaml.safe_dump(probed))
        for executable, extra in (('rog_server', []), ('rog_worker', ['-p', 'rank:=1']),
                                  ('netmon', ['-p', 'nodes:=1'])):
            module = importlib.import_module(f'rog_ros.nodes.{executable}')
            # Execute
            args = module.build_parser().parse_args(['--ros-args', '--params-file', path] +
                                                    extra)
            # Assert: in the fleet namespace, with its executable's section applied
            assert (args.node_namespace, args.node_name) == ('/rog', {
                'rog_server': 'rog_server', 'rog_worker': 'rog_worker_1',
                'netmon': 'netmon_1'}[executable])
            body = (sections.get(executable) or {}).get('ros__parameters', {})
            for key, value in body.items():
                assert getattr(args, key) == settings.BY_NAME[key].parse(value), \
                    (executable, key)
            assert path == str(ROOT / 'config' / name) or not body or \
                args.diagnostics_hz == PROBE_HZ, (executable, 'section left out')


def test_a_section_no_node_takes_is_found():
    nodes = [('rog_server', '/rog/rog_server'), ('rog_worker', '/rog/rog_worker_0')]
    sections = {'/**': {}, 'rog_worker': {}, '/rog/rog_server': {}, '/rog/rog_worker': {},
                'rog_worker_7': {}, '/robot1/rog_server': {}, '/**/rog_worker_*': {}}
    # the executable written as a fully qualified name names no node; nor a rank or a
    # namespace no node has
    assert sections_no_node_takes(sections, nodes) == ['/rog/rog_worker', 'rog_worker_7',
                                                       '/robot1/rog_server']


def test_security_docs_name_the_enclaves_the_keystore_makes():
    # Prepare
    text = (ROOT / 'docs' / 'security.md').read_text()
    made = set(keystore.ENCLAVES) | {f'/rog_ros/worker_{r}' for r in range(4)}
    # Execute: --enclave NAME and the table's `NAME` cells
    named = {_placeholders(n.rstrip(PUNCTUATION)) for n in
             re.findall(r'--enclave\s+(/[^\s`]+)', text) +
             re.findall(r'^\|\s*`(/[^`]+)`', text, re.M)}
    # Assert: enclaves are paths of their own (ROS 2 Foxy on), not node names, valid as rcl
    # validates them, and ones the keystore makes
    assert {'/rog_ros/server', '/rog_ros/worker', '/rog_ros/netmon'} <= named
    assert named <= made
    assert all(NAMESPACE.fullmatch(n) for n in made)


def test_security_docs_create_a_tools_enclave_for_the_fleets_domain():
    # Prepare: sros2's create_enclave grants the domain of ROS_DOMAIN_ID alone (0 when unset:
    # sros2/_utilities.py domain_id()); rog security keystore --domain-id 7 makes a fleet of 7
    text = ' '.join((ROOT / 'docs' / 'security.md').read_text().split())
    # Execute
    commands = re.findall(r'`([^`]*ros2 security create_enclave[^`]*)`', text)
    # Assert
    assert commands, 'docs/security.md shows no ros2 security create_enclave'
    for command in commands:
        assert re.match(r'ROS_DOMAIN_ID=\S+ ros2 security create_enclave ', command), (
            f'docs/security.md: {command}: sros2 grants only the domain of ROS_DOMAIN_ID '
            '(0 unset), so a fleet made with --domain-id would deny the enclave')


@pytest.mark.parametrize('namespace', ['/rog', '/lab2'])
def test_sros2_grants_cover_each_nodes_own_services_and_events(launched, namespace):
    # Prepare: every node of a robot fleet, and the DDS topics of its ROS 2 infrastructure
    nodes = {fqn: executable for name, values in LAUNCHES if name == 'robot.launch'
             for executable, _, fqn in launched(name, dict(values, namespace=namespace))}
    role = {settings.SERVER: 'server', settings.WORKER: 'worker', settings.NETMON: 'netmon'}
    for fqn, executable in nodes.items():
        xml = keystore.render(f'permissions_{role[executable]}.xml', {
            'enclave': '/rog_ros/x', 'ns': namespace.strip('/'), 'downlink': 'w*',
            'domains': '<id>0</id>', 'not_before': 'x', 'not_after': 'x'})
        publish, subscribe = (re.findall(r'<topic>([^<]+)</topic>', part) for part in
                              xml.split('<subscribe>'))
        services = ['get_parameters', 'set_parameters', 'describe_parameters']
        events = []
        if executable in LIFECYCLE_NODES:
            services += ['change_state', 'get_state']
            events = [f'rt{fqn}/transition_event']
        # Execute: DDS Security matches topic names as fnmatch does (* also matches /)
        answered = [t for s in services for t in (f'rq{fqn}/{s}Request', f'rr{fqn}/{s}Reply')]
        missing = [t for t in answered + events
                   if not any(fnmatch.fnmatchcase(t, p)
                              for p in (subscribe if t.startswith('rq') else publish))]
        # Assert
        assert missing == [], f'{fqn}: permissions_{role[executable]}.xml denies {missing}'
