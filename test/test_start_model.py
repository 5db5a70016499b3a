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
"""A run that starts from an earlier run's weights (``init_model``): checked, used by all nodes."""

import csv
import json
import os
from pathlib import Path
import subprocess
import sys
import time

from no_torch import run_without_torch
import pytest
from rog_ros.checks import ConfigError
from rog_ros.nodes import plan
from rog_ros.nodes.assembly import build_training, load_workload
from rog_ros.nodes.model_file import save_state_dict
from rog_ros.nodes.params import node_parser
from rog_ros.workloads.start_model import fingerprint, read_state
from test_nodes_lifecycle import in_memory_fleet, server_and_worker
import torch

ROOT = Path(__file__).resolve().parent.parent


def _adapted_toy(shift: float = 0.5) -> torch.nn.Module:
    """Toy model whose weights differ from the workload's checkpoint (an 'earlier run')."""
    model = load_workload('toy').make_model()
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.add_(shift * torch.linspace(-1, 1, p.numel()).reshape(p.shape) * (i + 1))
    return model


def test_a_workload_started_from_a_file_builds_exactly_those_weights(tmp_path):
    earlier = _adapted_toy()
    save_state_dict(tmp_path / 'model.pt', earlier)
    toy = load_workload('toy')
    before = fingerprint(toy.make_model())
    rng = torch.random.get_rng_state()
    going_on = toy.starting_from(tmp_path)            # a run directory: its model.pt
    assert torch.equal(torch.random.get_rng_state(), rng)   # the caller's stream untouched
    model = going_on.make_model()
    for (name, a), (_, b) in zip(earlier.state_dict().items(), model.state_dict().items()):
        assert torch.equal(a, b), name
    assert fingerprint(model) == fingerprint(earlier) != before
    assert fingerprint(toy.make_model()) == before     # the registry's workload is unchanged
    assert going_on.describe_start() == str(tmp_path / 'model.pt')
    assert 'pre-trained checkpoint' in toy.describe_start()


def test_the_fingerprint_changes_with_any_weight_name_or_shape():
    model = _adapted_toy()
    base = fingerprint(model)
    assert fingerprint(_adapted_toy()) == base          # equal weights, another module
    state = {k: v.clone() for k, v in model.state_dict().items()}
    assert fingerprint(state) == base
    first = next(iter(state))
    state[first].view(-1)[0] = torch.nextafter(state[first].view(-1)[0],
                                               torch.tensor(float('inf')))
    assert fingerprint(state) != base                   # one ulp of one weight
    renamed = {('x' + k): v for k, v in model.state_dict().items()}
    assert fingerprint(renamed) != base
    w = model.state_dict()[first]
    reshaped = {**model.state_dict(), first: w.reshape(-1)}
    assert fingerprint(reshaped) != base


@pytest.mark.parametrize('key', ['state_dict', 'model_state_dict'])
def test_a_training_checkpoint_is_read_through_its_state_dict_entry(tmp_path, key):
    model = _adapted_toy()
    torch.save({key: model.state_dict(), 'epoch': 3}, tmp_path / 'ckpt.pt')
    assert fingerprint(read_state(tmp_path / 'ckpt.pt')) == fingerprint(model)


def _refused(tmp_path, content, match):
    path = tmp_path / 'bad.pt'
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        torch.save(content, path)
    with pytest.raises(ValueError, match=match):
        load_workload('toy').starting_from(path)


def test_files_that_are_not_fitting_state_dicts_are_refused_with_the_reason(tmp_path):
    model = _adapted_toy()
    weight = next(iter(model.state_dict()))
    _refused(tmp_path, b'weights\n', 'not a file torch.load reads')
    _refused(tmp_path, model, 'Python objects.*whole pickled model')
    _refused(tmp_path, {}, 'empty dict')
    _refused(tmp_path, [torch.zeros(3)], 'holds list, not a state_dict')
    _refused(tmp_path, {'weight': torch.zeros(4, 16), 'lr': 0.1}, 'not a name -> tensor')
    nan = {k: v.clone() for k, v in model.state_dict().items()}
    nan[weight].view(-1)[3] = float('nan')
    _refused(tmp_path, nan, f'NaN or infinite values in {weight}')
    _refused(tmp_path, torch.nn.Linear(3, 2).state_dict(),
             r'weight is 2x3 in the file, 4x16 in workload toy')
    _refused(tmp_path, {'extra': torch.zeros(1), **model.state_dict()}, 'not in workload.*extra')
    partial = {k: v for k, v in model.state_dict().items() if k != weight}
    _refused(tmp_path, partial, f'missing {weight}')
    ints = {k: v.to(torch.int64) for k, v in model.state_dict().items()}
    _refused(tmp_path, ints, 'integer values')
    with pytest.raises(ValueError, match='no such file'):
        load_workload('toy').starting_from(tmp_path / 'nothere.pt')
    (tmp_path / 'run').mkdir()
    with pytest.raises(ValueError, match='directory without model.pt'):
        load_workload('toy').starting_from(tmp_path / 'run')


def test_the_fleet_plan_refuses_a_bad_file_before_anything_starts(tmp_path):
    save_state_dict(tmp_path / 'model.pt', torch.nn.Linear(3, 2))
    with pytest.raises(ConfigError, match=r'init_model \(--init-model\): does not fit'):
        plan.plan(overrides={'workload': 'toy', 'init_model': str(tmp_path / 'model.pt')})
    save_state_dict(tmp_path / 'model.pt', _adapted_toy())
    specs = plan.plan(overrides={'workload': 'toy', 'init_model': str(tmp_path)})
    assert {s.parameters.get('init_model') for s in specs if s.role != 'netmon'} == {str(tmp_path)}


def test_a_node_refuses_a_bad_file_at_its_command_line(tmp_path, capsys):
    from rog_ros.nodes.params import check_fleet_args
    parser = node_parser('rog_worker', 'rog_worker', '')
    args = parser.parse_args(['--workload', 'toy', '--init-model', str(tmp_path / 'x.pt')])
    with pytest.raises(SystemExit) as stop:
        check_fleet_args(parser, args)
    assert stop.value.code == 2
    assert '--init-model: no such file' in capsys.readouterr().err


def test_the_nodes_training_starts_from_the_file_and_names_it(tmp_path):
    earlier = _adapted_toy()
    save_state_dict(tmp_path / 'model.pt', earlier)
    args = node_parser('rog_server', 'rog_server', '').parse_args(
        ['--workload', 'toy', '--init-model', str(tmp_path / 'model.pt')])
    tr = build_training(args)
    flat = tr.layout.flatten([p.detach() for p in earlier.parameters()])
    assert torch.equal(tr.w0, flat)
    assert tr.fingerprint == fingerprint(earlier)
    assert tr.start_line() == (f'starting model: {tmp_path / "model.pt"} '
                               f'(fingerprint {fingerprint(earlier)})')
    plain = build_training(node_parser('rog_server', 'rog_server', '').parse_args(
        ['--workload', 'toy']))
    assert plain.fingerprint == fingerprint(load_workload('toy').make_model())
    assert not torch.equal(plain.w0, tr.w0)


def test_a_fleet_goes_on_from_an_earlier_runs_model(tmp_path):
    """Every node starts from the file: same fingerprint in each log, first evaluation equal."""
    pytest.importorskip('cyclonedds')
    earlier = _adapted_toy(shift=0.2)
    save_state_dict(tmp_path / 'day1' / 'model.pt', earlier)
    out = tmp_path / 'day2'
    proc = subprocess.run(
        [sys.executable, '-m', 'rog_ros.nodes.fleet', '--workload', 'toy', '--workers', '2',
         '--iterations', '10', '--eval-every', '5', '--no-netmon', '--out', str(out),
         '--init-model', str(tmp_path / 'day1'),
         '--namespace', f'/rog_test_{os.getpid()}_init'],
        capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((out / 'summary.json').read_text())
    want = fingerprint(earlier)
    assert summary['start_model'] == {'source': str(tmp_path / 'day1' / 'model.pt'),
                                      'fingerprint': want}
    for log in ('rog_server', 'rog_worker_0', 'rog_worker_1'):
        text = (out / 'logs' / f'{log}.log').read_text()
        assert f'(fingerprint {want})' in text, log
    with open(out / 'timeseries.csv') as f:
        first = next(csv.DictReader(f))
    assert float(first['iteration']) == 0.0
    expected = load_workload('toy').evaluate(earlier)['accuracy']
    assert float(first['accuracy']) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize('resync', [True, False])
def test_a_robot_that_started_apart_is_sent_the_servers_model(tmp_path, monkeypatch, resync):
    """Server on the checkpoint, worker on a file: the server sees it in the worker's status."""
    from rog_ros.nodes import server_node
    in_memory_fleet(monkeypatch)
    if not resync:                 # the check below can fail: a fleet without the resync
        monkeypatch.setattr(server_node.ServerNode, '_started_apart', lambda self, msg: None)
    save_state_dict(tmp_path / 'other.pt', _adapted_toy())
    # (without the final model, which would mend the end of a run apart as well)
    srv, wrk = server_and_worker(tmp_path / 'out', '/apart',
                                 ['--iterations', '8', '--eval-every', '4',
                                  '--final-model', 'false'],
                                 ['--init-model', str(tmp_path / 'other.pt')])
    try:
        assert srv.activate() and wrk.activate()
        # a wall-clock bound, not a count of turns: a turn takes no time while nothing is
        # due, and the run waits on real timers (20,000 turns took less than the 0.1-0.7 s a
        # run needs on an idle machine: the test failed on a fast machine, not a slow one)
        deadline = time.monotonic() + 120.0
        while not srv.engine.finished and time.monotonic() < deadline:
            wrk.spin_once()
            srv.spin_once()
        assert srv.engine.finished
        gap = float((wrk.engine.w - srv.engine.worker_model(0)).abs().max())
        summary = srv.finish()
    finally:
        wrk.shutdown()
        srv.shutdown()
    if not resync:
        assert gap > 0.1                      # it trained apart all run long
        return
    assert gap < 1e-6                         # it holds exactly the server's view of it
    assert summary['started_apart'] == {'0': fingerprint(_adapted_toy())}
    with open(tmp_path / 'out' / 'events.csv') as f:
        events = [row for row in csv.DictReader(f) if row['event'] == 'start_mismatch']
    assert len(events) == 1 and "its next pull is the server's model" in events[0]['what']


def test_the_status_field_changed_only_the_status_layout_version():
    """A client that speaks the row protocol at version 3 is not cut off by the new field."""
    from rog_ros.protocol import messages as m
    assert m.SCHEMA_VERSION == 3 and m.TRAIN_STATUS_SCHEMA == 4
    m.check_schema(m.TransferAck(transfer_id=1, sender=0, receiver=m.SERVER, seq=0))
    m.check_schema(m.TrainStatus(node=0, stamp=0.0, start_model='92bcacacc3b9'))
    with pytest.raises(m.MessageError, match='TrainStatus: schema_version 3, this build speaks 4'):
        m.check_schema(m.TrainStatus(node=0, stamp=0.0, schema_version=3))
    with pytest.raises(m.MessageError, match='RowChunk: schema_version 4, this build speaks 3'):
        m.check_schema(m.RowChunk(transfer_id=1, seq=0, sender=0, receiver=m.SERVER, kind=0,
                                  clock=0, schema_version=4))


def test_the_simulator_starts_from_the_file_too(tmp_path, capsys):
    from rog_ros import cli
    from rog_ros.sim.simulator import SimConfig, simulate
    earlier = _adapted_toy(shift=0.3)
    save_state_dict(tmp_path / 'model.pt', earlier)
    cfg = SimConfig(workload='toy', system='rog:4', workers=2, trace='clean', iterations=4,
                    init_model=str(tmp_path))
    rec = simulate(cfg)
    summary = rec.summary()
    assert summary['start_model'] == {'source': str(tmp_path / 'model.pt'),
                                      'fingerprint': fingerprint(earlier)}
    expected = load_workload('toy').evaluate(earlier, max_samples=cfg.eval_samples)
    assert rec.rows[0]['accuracy'] == pytest.approx(expected['accuracy'], abs=1e-12)
    assert cli.main(['sim', '--workload', 'toy', '--init-model', str(tmp_path / 'x')]) == 2
    assert 'rog sim: --init-model: no such file' in capsys.readouterr().err


_PLAN = """
from rog_ros.nodes import plan
plan.validate(plan.resolve(None, {'workload': 'toy', 'init_model': sys.argv[1]}))
try:
    plan.validate(plan.resolve(None, {'workload': 'toy', 'init_model': sys.argv[2]}))
except ValueError as err:
    print(err)
"""


def test_the_starting_weights_are_checked_in_a_child_without_torch_here(tmp_path):
    # a robot's supervisor and launch process check the plan and then live for the whole run:
    # the check (the workload built, the file read) runs in a child process of its own
    save_state_dict(tmp_path / 'model.pt', _adapted_toy())
    save_state_dict(tmp_path / 'other.pt', torch.nn.Linear(3, 2))
    proc = run_without_torch(_PLAN, str(tmp_path), str(tmp_path / 'other.pt'))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith('init_model (--init-model): does not fit'), proc.stdout


def test_a_whole_pickled_model_is_named_as_such_on_jetpacks_torch_too():
    # torch 2.0 (JetPack 5) says 'Unsupported class X' where later releases say 'GLOBAL X'
    from rog_ros.workloads.start_model import _unreadable
    for text in ('Weights only load failed. ... Unsupported class torch.nn.modules.linear.Linear',
                 'Weights only load failed. ... Unsupported global: GLOBAL '
                 'torch.nn.modules.linear.Linear was not an allowed global'):
        line = _unreadable('m.pt', RuntimeError(text))
        assert 'holds Python objects' in line and 'torch.nn.modules.linear.Linear' in line


def test_a_status_of_no_run_the_server_knows_sends_no_model():
    """A status names the run that sent it: one of another run must not cost a whole model."""
    from types import SimpleNamespace
    from rog_ros.nodes.server_node import ServerNode
    from rog_ros.protocol import messages as m
    sent = []
    node = SimpleNamespace(
        engine=SimpleNamespace(worker_inc=[111, 222],
                               resync=lambda rank, info: sent.append(rank) or []),
        _resynced={}, recorder=SimpleNamespace(extra={}),
        training=SimpleNamespace(fingerprint='aaaaaaaaaaaa'),
        driver=SimpleNamespace(handle=lambda actions, now: None, clock=lambda: 0.0))
    for incarnation in range(1000, 1100):      # a hundred runs nobody started
        ServerNode._started_apart(node, m.TrainStatus(node=0, stamp=0.0, incarnation=incarnation,
                                                      start_model='bbbbbbbbbbbb'))
    assert sent == [] and node._resynced == {}
    for _ in range(3):                          # the engine's run: once
        ServerNode._started_apart(node, m.TrainStatus(node=0, stamp=0.0, incarnation=111,
                                                      start_model='bbbbbbbbbbbb'))
    assert sent == [0] and node._resynced == {0: 111}
