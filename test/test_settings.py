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
One declaration per setting: CLI flags, ROS parameters, YAML keys, launch arguments, docs.

Tested without ROS: the flags of every node, the keys of the shipped config/*.yaml files and
the launch arguments all come from ``settings.SETTINGS``; ``--ros-args -p`` and
``--params-file`` resolve with ROS 2's precedence; the ROS parameter descriptors carry the
ranges (with a stand-in ``rcl_interfaces`` module); docs/configuration.md is up to date.
"""

import argparse
import os
from pathlib import Path
import stat
import sys
import types

import pytest
from rog_ros.nodes import fleet as fleet_cli
from rog_ros.nodes import netmon, rog_server, rog_worker, settings
from rog_ros.nodes import plan as fleet
import yaml

ROOT = Path(__file__).resolve().parent.parent
PARSERS = {'rog_server': rog_server.build_parser, 'rog_worker': rog_worker.build_parser,
           'netmon': netmon.build_parser}


@pytest.mark.parametrize('role', sorted(PARSERS))
def test_every_node_flag_is_a_declared_setting_and_vice_versa(role):
    parser = PARSERS[role]()
    flags = {opt for action in parser._actions for opt in action.option_strings
             if opt.startswith('--') and opt != '--help'}
    extra = {settings.WORKLOAD_OPTION_FLAG} if role in settings.TRAINING else set()
    assert flags == {s.flag for s in settings.for_role(role)} | extra
    args = parser.parse_args([])
    assert {k: getattr(args, k) for k in settings.defaults(role)} == settings.defaults(role)


def test_rog_fleet_accepts_every_fleet_setting():
    import argparse
    from rog_ros.nodes import fleet as cli_fleet
    parser = argparse.ArgumentParser()
    cli_fleet.add_parser(parser.add_subparsers())
    fleet_parser = parser._subparsers._group_actions[0].choices['fleet']
    flags = {o for a in fleet_parser._actions for o in a.option_strings}
    missing = {s.flag for s in settings.for_role('fleet')} - flags
    assert missing <= {'--netmon'}, missing      # --no-netmon is the fleet's spelling


def test_precedence_default_file_flag_then_p(tmp_path):
    # Prepare
    params = tmp_path / 'p.yaml'
    params.write_text(yaml.safe_dump({
        '/**': {'ros__parameters': {'staleness': 2, 'workers': 4, 'eval_every': 7}},
        'rog_worker': {'ros__parameters': {'staleness': 3}},
        'rog_worker_2': {'ros__parameters': {'window': 9}},
        'rog_worker_1': {'ros__parameters': {'window': 5}},
    }))
    parser = rog_worker.build_parser()
    # Execute
    args = parser.parse_args(['--seed', '5', '--window', '6', '--ros-args', '--params-file',
                              str(params), '-p', 'rank:=2', '-p', 'seed:=8', '--'])
    plain = parser.parse_args(['--rank', '1'])
    # Assert
    assert args.workers == 4                      # /** section
    assert args.staleness == 3                    # executable section beats /**
    assert args.window == 6                       # flag beats the node's own section
    assert args.seed == 8 and args.rank == 2      # -p beats the flag
    assert args.node_name == 'rog_worker_2'
    assert (plain.window, plain.staleness, plain.node_name) == (4, 4, 'rog_worker_1')


def test_params_file_section_of_the_node_name_applies(tmp_path):
    params = tmp_path / 'p.yaml'
    params.write_text(yaml.safe_dump({'rog_worker_2': {'ros__parameters': {'window': 9}},
                                      'rog_worker_*': {'ros__parameters': {'staleness': 1}}}))
    args = rog_worker.build_parser().parse_args(
        ['--ros-args', '-p', 'rank:=2', '--params-file', str(params)])
    assert (args.window, args.staleness) == (9, 1)


@pytest.mark.parametrize('argv, expected', [
    ([], (4, 2)),                                   # /rog/rog_server: its bare name only
    (['-r', '__ns:=/robot1'], (7, 2)),
    (['-r', '__ns:=/robot2'], (9, 5)),              # ** is zero or more names
    (['-r', '__ns:=/lab/robot2'], (4, 5)),          # /**/robot2/rog_s* only
    (['-p', 'namespace:=/robot2'], (9, 5)),         # the fleet namespace, not remapped
])
def test_params_file_sections_of_a_namespace_apply_to_the_nodes_in_it(tmp_path, argv,
                                                                      expected):
    # Prepare: one file for two robots, keyed by fully qualified node names, as rcl reads them
    params = tmp_path / 'p.yaml'
    params.write_text(yaml.safe_dump({
        '/robot1/rog_server': {'ros__parameters': {'staleness': 7}},
        '/robot2/rog_server': {'ros__parameters': {'staleness': 9}},
        '/**/robot2/rog_s*': {'ros__parameters': {'window': 5}},
        'rog_server': {'ros__parameters': {'window': 2}}}))
    # Execute
    args = rog_server.build_parser().parse_args(['--ros-args', '--params-file', str(params)] +
                                                argv)
    # Assert: each robot's own section, a namespaced one over the bare name's
    assert (args.staleness, args.window) == expected


def test_a_namespace_given_in_the_params_file_is_the_one_its_sections_match(tmp_path):
    # Prepare: the fleet namespace (the node's, unless -r __ns:=) set by the file's /**
    params = tmp_path / 'p.yaml'
    params.write_text(yaml.safe_dump({
        '/**': {'ros__parameters': {'namespace': '/lab'}},
        '/lab/rog_server': {'ros__parameters': {'staleness': 7}},
        '/rog/rog_server': {'ros__parameters': {'staleness': 3}}}))
    # Execute
    args = rog_server.build_parser().parse_args(['--ros-args', '--params-file', str(params)])
    # Assert: the node is /lab/rog_server, and so is the section that applies to it
    assert (args.node_namespace, args.staleness) == ('/lab', 7)


def test_rclpy_own_parameters_are_left_alone_and_sim_time_is_refused(tmp_path, capsys):
    # Prepare: what a ROS 2 launch setup writes for every node
    params = tmp_path / 'p.yaml'
    params.write_text(yaml.safe_dump({'/**': {'ros__parameters': {
        'use_sim_time': False, 'start_type_description_service': True, 'staleness': 2}}}))
    # Execute
    args = rog_worker.build_parser().parse_args(
        ['--ros-args', '--params-file', str(params), '-p', 'use_sim_time:=false'])
    plans = fleet.resolve({'/**': {'use_sim_time': False, 'staleness': 3}})
    # Assert: read as rclpy declares them, no unknown-parameter error, and no setting of ours
    assert args.staleness == 2 and not hasattr(args, 'use_sim_time')
    assert plans['rog_server']['staleness'] == 3
    assert 'use_sim_time' not in plans['rog_server']
    with pytest.raises(ValueError, match='use_sim_time True: rog_ros nodes keep wall-clock'):
        settings.check_parameter_file({'/**': {'use_sim_time': True}})
    with pytest.raises(ValueError, match="use_sim_time 'false': rog_ros nodes keep"):
        settings.check_parameter_file({'/**': {'use_sim_time': 'false'}})   # rclpy: a string
    with pytest.raises(SystemExit) as exc:
        rog_worker.build_parser().parse_args(['--ros-args', '-p', 'use_sim_time:=true'])
    assert exc.value.code == 2
    assert "error: -p: use_sim_time 'true': rog_ros nodes keep" in capsys.readouterr().err
    with pytest.raises(ValueError, match='parameter file /\\*\\*: use_sim_time True'):
        fleet.resolve({'/**': {'use_sim_time': True}})


@pytest.mark.parametrize('argv,message', [
    (['--ros-args', '-p', 'stalenes:=3'], "no parameter 'stalenes'"),
    (['--ros-args', '-p', 'staleness:=-1'], 'staleness (--staleness) must be in [0, 1000]'),
    (['--staleness', 'four'], 'is not an integer'),
    (['--sync', 'asgdd'], 'sync (--sync) must be one of'),
    (['--ros-args', '-p', 'staleness'], 'expected name:=value'),
])
def test_bad_values_are_one_line_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        rog_server.build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and message in err


def test_ros_namespace_remap_moves_the_node_not_its_topics():
    # Execute: as ros2 run ... --ros-args -r __ns:= -r __node:= (or launch_ros's Node) passes
    args = rog_server.build_parser().parse_args(
        ['--ros-args', '-r', '__ns:=/robot1', '-r', '__node:=arm_server'])
    # Assert: the node is /robot1/arm_server; its topics stay the fleet's (robots in other
    # namespaces still talk to it), and so does its status topic's name
    assert (args.node_namespace, args.node_name) == ('/robot1', 'arm_server')
    assert args.namespace == '/rog' and args.status_name == 'rog_server'


def test_a_ros_namespace_over_the_default_fleet_namespace_is_warned_about():
    # before 2026-12-06 -r __ns:= (PushRosNamespace) also moved the topics: two fleets
    # launched under /lab1 and /lab2 were two fleets, now they share /rog's topics
    moved = rog_server.build_parser().parse_args(['--ros-args', '-r', '__ns:=/lab1'])
    assert 'at /lab1/rog_server' in moved.namespace_note
    assert moved.namespace_note.endswith('-p namespace:=/lab1')
    apart = rog_server.build_parser().parse_args(
        ['--namespace', '/lab1', '--ros-args', '-r', '__ns:=/lab1'])
    assert apart.namespace_note is None
    assert rog_server.build_parser().parse_args([]).namespace_note is None


def test_rog_fleet_places_its_nodes_below_the_fleet_namespace_without_a_warning(monkeypatch):
    # Setup: the -r __ns:= that rog fleet gives every node of a run into --out runs/fleet,
    # and the variable in their environment that says rog fleet placed them there
    graph_ns = fleet_cli.run_namespace(settings.DEFAULT_NAMESPACE, 'runs/fleet')
    remap = ['--ros-args', '-r', f'__ns:={graph_ns}']
    monkeypatch.setenv(settings.FLEET_PLACED_ENV, graph_ns)
    # Execute: each node parses it as its own command line
    parsed = [parser.parse_args(remap) for parser in
              (rog_server.build_parser(), rog_worker.build_parser(), netmon.build_parser())]
    # Assert: the nodes are /rog/fleet/..., still in the fleet /rog (their names say so): the
    # README's first command logged the warning for every node ("warnings in the robots'
    # logs" on every run); a namespace beside /rog is still warned about
    assert [args.node_namespace for args in parsed] == ['/rog/fleet'] * 3
    assert [args.namespace_note for args in parsed] == [None] * 3
    assert settings.namespace_note('/rogue', 'rog_server', '/rog') is not None


def test_a_user_s_ros_namespace_below_the_default_fleet_namespace_is_warned_about(monkeypatch):
    # Setup: two launch files under PushRosNamespace('/rog/lab1') and ('/rog/lab2') on one
    # domain, with no namespace of their own: both fleets' topics are /rog's, one fleet
    monkeypatch.delenv('ROG_FLEET_NODE_NAMESPACE', raising=False)
    # Execute
    notes = [rog_server.build_parser().parse_args(['--ros-args', '-r', f'__ns:={ns}'])
             .namespace_note for ns in ('/rog/lab1', '/rog/lab2')]
    # Assert: each says it (the exemption of rog fleet's own /rog/<out> silenced them), and
    # rog fleet's placement exempts its own namespace only
    assert [note.endswith(f'-p namespace:={ns}') for note, ns in
            zip(notes, ('/rog/lab1', '/rog/lab2'))] == [True, True]
    assert settings.namespace_note('/rog/lab1', 'rog_server', '/rog', '/rog/fleet') is not None
    assert settings.namespace_note('/rog/fleet', 'rog_server', '/rog', '/rog/fleet') is None


def test_a_node_is_in_its_fleet_namespace_unless_remapped():
    args = rog_worker.build_parser().parse_args(['--rank', '1', '--workers', '2',
                                                 '--namespace', '/lab2'])
    assert (args.node_namespace, args.node_name) == ('/lab2', 'rog_worker_1')


@pytest.mark.parametrize('rules, expected', [
    (['-r', '__ns:=/a', '-r', '__ns:=/b'], ('/a', 'rog_server')),        # rcl: first match
    (['-r', 'rog_worker_0:__ns:=/w', '-r', '__ns:=/s'], ('/s', 'rog_server')),  # not ours
    (['-r', '__name:=srv', '-r', 'srv:__ns:=/x'], ('/x', 'srv')),       # after the renaming
    (['-r', '/rog/up/chunks:=/other'], ('/rog', 'rog_server')),          # a topic remap
])
def test_remap_rules_apply_as_rcl_applies_them(rules, expected):
    args = rog_server.build_parser().parse_args(['--ros-args'] + rules)
    assert (args.node_namespace, args.node_name) == expected


@pytest.mark.parametrize('rule, message', [
    ('__ns:=robot1', 'a namespace must be fully qualified'),
    ('__ns:=/robot-1', 'a namespace must be fully qualified'),
    ('__node:=2nd', 'is not a valid node name'),
    ('__ns:=/robot1/', 'no / at the end), e.g. __ns:=/robot1'),
    ('__ns:=/lab/robot__1', 'two _ in a row in a remap rule (rclpy.init refuses it); e.g. '
                            '/lab/robot_1'),
    ('__node:=arm__server', 'two _ in a row'),
])
def test_a_remap_rcl_would_refuse_is_a_usage_error(rule, message, capsys):
    with pytest.raises(SystemExit) as exc:
        rog_server.build_parser().parse_args(['--ros-args', '-r', rule])
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_ros_namespace_variable_is_not_read_as_rcl_does_not(monkeypatch):
    monkeypatch.setenv('ROS_NAMESPACE', '/robot9')
    assert rog_server.build_parser().parse_args([]).node_namespace == '/rog'


@pytest.mark.parametrize('name', ['fleet', 'mpcol', 'eacol'])
def test_shipped_yaml_files_use_only_declared_keys(name):
    sections = settings.read_parameter_file(ROOT / 'config' / f'{name}.yaml')
    settings.check_parameter_file(sections)          # raises on an unknown key or bad value
    keys = {k for params in sections.values() for k in params}
    assert keys <= set(settings.BY_NAME)


def test_unknown_yaml_key_is_rejected():
    with pytest.raises(ValueError, match="unknown parameter 'stalenes'"):
        settings.check_parameter_file({'/**': {'ros__parameters': {}}.get('x', {}),
                                       'rog_server': {'stalenes': 1}})


def test_launch_arguments_are_the_settings_plus_config():
    node_settings = {s.name for s in settings.SETTINGS if set(s.roles) & set(settings.NODES)}
    assert set(fleet.LAUNCH_ARGUMENTS) == node_settings | {'config'}
    got = fleet.launch_overrides({'eval_every': '20', 'lr': '', 'trace_scale': '0.5'})
    assert got == {'eval_every': 20, 'trace_scale': 0.5}


def test_docs_configuration_reference_is_up_to_date():
    committed = (ROOT / 'docs' / 'configuration.md').read_text(encoding='utf-8')
    section = settings.generated_section(committed)
    assert section == settings.configuration_reference().strip('\n'), \
        'regenerate: python -m rog_ros.nodes.settings docs/configuration.md'
    for s in settings.SETTINGS:
        assert f'| `{s.name}` |' in section


def test_generator_refuses_a_missing_folder_in_one_line(tmp_path, capsys):
    # a traceback (FileNotFoundError) before
    target = tmp_path / 'nowhere' / 'configuration.md'
    assert settings.main([str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and 'Traceback' not in err, err
    assert err.startswith('python -m rog_ros.nodes.settings: cannot update ')
    assert f'its folder {tmp_path / "nowhere"} does not exist' in err
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize('name, said', [
    ('missing.md', 'does not exist; the generator rewrites'),
    ('.', 'is a folder'),
    ('plain.md', 'lacks the'),
])
def test_generator_refuses_other_bad_targets_in_one_line(name, said, tmp_path, capsys):
    (tmp_path / 'plain.md').write_text('no markers\n', encoding='utf-8')
    assert settings.main([str(tmp_path / name)]) == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1 and said in err, err
    assert sorted(os.listdir(tmp_path)) == ['plain.md']
    assert (tmp_path / 'plain.md').read_text(encoding='utf-8') == 'no markers\n'


def test_generator_rewrites_a_copy_of_the_reference(tmp_path):
    copy = tmp_path / 'configuration.md'
    text = (ROOT / 'docs' / 'configuration.md').read_text(encoding='utf-8')
    copy.write_text(text.replace('| `workers` |', '| `old` |'), encoding='utf-8')
    assert settings.main([str(copy)]) == 0
    assert copy.read_text(encoding='utf-8') == text
    assert os.listdir(tmp_path) == ['configuration.md']


class _Msg:
    """Stand-in ROS message: keyword fields."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def test_ros_parameters_are_declared_with_ranges(monkeypatch):
    # Prepare: a stand-in rcl_interfaces.msg (ROS 2 is not installed here)
    fake = types.ModuleType('rcl_interfaces.msg')
    for cls in ('FloatingPointRange', 'IntegerRange', 'ParameterDescriptor'):
        setattr(fake, cls, type(cls, (_Msg,), {}))
    fake.ParameterType = types.SimpleNamespace(
        PARAMETER_BOOL=1, PARAMETER_INTEGER=2, PARAMETER_DOUBLE=3, PARAMETER_STRING=4)
    monkeypatch.setitem(sys.modules, 'rcl_interfaces', types.ModuleType('rcl_interfaces'))
    monkeypatch.setitem(sys.modules, 'rcl_interfaces.msg', fake)
    declared = {}

    class Node:
        """Stand-in rclpy node: records declared parameters."""

        def declare_parameter(self, name, value, descriptor):
            declared[name] = (value, descriptor)

    args = rog_server.build_parser().parse_args(['--staleness', '2'])
    # Execute
    settings.declare_ros_parameters(Node(), 'rog_server', args)
    # Assert
    assert set(declared) == {s.name for s in settings.for_role('rog_server')}
    value, desc = declared['staleness']
    assert value == 2 and desc.type == 2
    assert (desc.integer_range[0].from_value, desc.integer_range[0].to_value) == (0, 1000)
    value, desc = declared['deadline_floor']
    assert desc.floating_point_range[0].to_value == 10.0 and desc.type == 3
    assert declared['lr'][0] == 0.0                  # "not set" stand-in, typed
    assert declared['diagnostics_hz'][1].read_only is False
    assert declared['workers'][1].read_only is True


def test_launch_files_read_the_settings_without_importing_torch():
    """A launch process lives as long as the fleet: no engines (torch) only for defaults."""
    import subprocess
    code = ('import sys; import rog_ros.nodes.launching, rog_ros.nodes.settings; '
            'print(sorted(m for m in ("torch", "rog_ros.protocol.policies") '
            'if m in sys.modules))')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         check=True, cwd=str(ROOT)).stdout
    assert out.strip() == '[]'


def test_a_robots_plan_is_checked_and_netmon_runs_without_importing_torch():
    """
    The robot's supervisor, its launch process and netmon train nothing: no torch in them.

    Each lives for the whole run on a robot, where torch costs seconds and a few hundred MB
    (a Jetson shares those with its GPU). The checks that do need torch (a CUDA device, the
    weights of ``init_model``) import it only for such values.
    """
    import subprocess
    code = ('import sys\n'
            'from rog_ros.nodes import plan, robot\n'
            'import rog_ros.nodes.netmon\n'
            'plan.validate(plan.resolve(None, {}))\n'
            'plan.validate(plan.resolve(None, {"sync": "adacomp"}))\n'
            'plan.validate(plan.resolve(None, {"sync": "ssp", "staleness": 2}))\n'
            'n = len(robot.robot_plan("worker", 1, {}, {"device": "cpu"}))\n'
            'n += len(robot.robot_plan("server", 0, {}, {}))\n'
            'try:\n'
            '    plan.validate(plan.resolve(None, {"sync": "rog", "staleness": -1}))\n'
            'except ValueError:\n'
            '    n += 100\n'
            'print(n, sorted(m for m in ("torch", "rog_ros.core.rows") if m in sys.modules))\n')
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                         check=True, cwd=str(ROOT)).stdout.split(maxsplit=1)
    assert out[0] == '104' and out[1].strip() == '[]', out


def test_the_settings_defaults_are_the_policies_defaults():
    from rog_ros.protocol.policies import make_policy
    from rog_ros.protocol.policies.base import SyncPolicy
    rog = make_policy('rog:4')
    assert settings.FREE_STRAGGLERS_DEFAULT is rog.free_stragglers is True
    assert settings.DEFAULT_DEADLINE_FLOOR == SyncPolicy.deadline_floor == rog.deadline_floor
    for name in ('rtt_floor', 'outage_bound'):
        declared = next(s.default for s in settings.SETTINGS if s.name == name)
        assert declared == getattr(SyncPolicy, name) == getattr(rog, name)


def test_an_absence_timeout_must_outlast_two_pokes_of_a_waiting_worker():
    """Refuse 0 < absence_timeout < 16 s (two pokes) as given or in a file; take 0 and 16."""
    import inspect
    from rog_ros.protocol.ps import ServerEngine
    from rog_ros.protocol.revival import shortest_sound_absence_s
    from rog_ros.protocol.worker import WorkerEngine
    for engine in (ServerEngine, WorkerEngine):     # the nodes keep the engines' default
        default = inspect.signature(engine).parameters['end_timeout_s'].default
        assert shortest_sound_absence_s(default) == settings.LEAST_ABSENCE_TIMEOUT_S == 16.0
    setting = settings.BY_NAME['absence_timeout']
    for value, strict in (('15.99', False), ('1e-3', False), (8.0, True), (15, True)):
        with pytest.raises(settings.ConfigError) as refused:
            setting.parse(value, strict)
        assert '\n' not in str(refused.value) and 'give at least 16, or 0 for never' in str(
            refused.value)
    assert [setting.parse(v, s) for v, s in (('16', False), ('0', False), (0.0, True),
                                             (16, True), (600.0, True))] == [
        16.0, None, None, 16.0, 600.0]
    for path in sorted((ROOT / 'config').glob('*.yaml')):     # the shipped files still load
        fleet.resolve(fleet.load_parameter_file(str(path)), {})


def test_a_renamed_netmon_still_publishes_on_the_topic_the_server_reads(monkeypatch):
    # Prepare: robot 0's netmon, renamed in the graph (as a launch file's name= would)
    from rog_ros.nodes import linkprobe, monitor

    monkeypatch.setattr(linkprobe, 'read_counters', lambda: {'lo': (0, 0)})
    args = netmon.build_parser().parse_args(['--nodes', '0', '--interface', 'lo',
                                             '--ros-args', '-r', '__node:=arm_netmon'])
    # Execute
    mon = monitor.NetMonitor(None, 'lo', [0], args)
    # Assert: the graph has the new name, the LinkStats topic the one the server subscribes
    assert args.node_name == 'arm_netmon'
    assert mon.topic == 'status/netmon_0/link_stats'


def test_generator_keeps_a_reference_that_is_a_link_and_writes_through_it(tmp_path):
    # the atomic rewrite put a plain file in the link's place (open(path, 'w') wrote through)
    real = tmp_path / 'shared' / 'configuration.md'
    real.parent.mkdir()
    text = (ROOT / 'docs' / 'configuration.md').read_text(encoding='utf-8')
    real.write_text(text.replace('| `workers` |', '| `old` |'), encoding='utf-8')
    link = tmp_path / 'configuration.md'
    link.symlink_to(real)
    assert settings.main([str(link)]) == 0
    assert link.is_symlink() and real.read_text(encoding='utf-8') == text
    assert sorted(os.listdir(tmp_path)) == ['configuration.md', 'shared']


@pytest.mark.parametrize('mode', [0o664, 0o600, 0o640])
@pytest.mark.parametrize('linked', [False, True])
def test_generator_keeps_the_reference_s_mode(tmp_path, mode, linked):
    # the atomic rewrite gave the file the umask's mode (0644): a group-writable reference
    # lost its group's write, a private one became world-readable; open(path, 'w') kept it
    real = tmp_path / 'shared' / 'configuration.md'
    real.parent.mkdir()
    text = (ROOT / 'docs' / 'configuration.md').read_text(encoding='utf-8')
    real.write_text(text.replace('| `workers` |', '| `old` |'), encoding='utf-8')
    real.chmod(mode)
    target = real
    if linked:
        target = tmp_path / 'configuration.md'
        target.symlink_to(real)
    old_umask = os.umask(0o022)
    try:
        assert settings.main([str(target)]) == 0
    finally:
        os.umask(old_umask)
    assert real.read_text(encoding='utf-8') == text
    assert stat.S_IMODE(real.stat().st_mode) == mode
    assert target.is_symlink() == linked
    assert sorted(os.listdir(real.parent)) == ['configuration.md']      # no temporary left


def test_help_text_escapes_a_percent_in_its_default_too():
    # help_text escaped the description and range for argparse, not the default it appends
    # (rog fleet's own text had escaped it): a default with '%' broke --help
    setting = settings.Setting('share', str, '50%', 'Share of 100% kept.')
    parser = argparse.ArgumentParser(prog='x')
    parser.add_argument('--share', help=setting.help_text)
    assert "Share of 100% kept. (default '50%')" in ' '.join(parser.format_help().split())
