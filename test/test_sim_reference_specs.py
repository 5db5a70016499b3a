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
"""The reference systems' specs: arguments, ``#field=value`` tags, workload options, keys."""

from __future__ import annotations

import json
import os
import re
import time

import pytest
from rog_ros import checks, cli
from rog_ros.nodes import server_node
from rog_ros.protocol.policies import adacomp as adacomp_policy
from rog_ros.sim.runners import adacomp, aet, fleet, gsp
from rog_ros.sim.simulator import SimConfig, simulate
from test_nodes_lifecycle import in_memory_fleet, run_to_the_end, server_and_workers

DOCS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'docs')


def _forbid(monkeypatch) -> None:
    """Make any simulation or comparison started by the test fail it."""
    from rog_ros.experiments import compare
    from rog_ros.sim import simulator

    def forbidden(*args, **kwargs):
        raise AssertionError('a refused option started a run')
    monkeypatch.setattr(simulator, 'simulate', forbidden)
    monkeypatch.setattr(compare, 'compare', forbidden)


def _tiny(system: str, **kwargs) -> dict:
    """Return the summary of a two-worker, three-iteration toy run of ``system``."""
    return simulate(SimConfig(workload='toy', system=system, workers=2, iterations=3,
                              evaluations=1, trace='clean', **kwargs)).summary()


@pytest.mark.parametrize('argv, message', [
    (['sim', '--workload', 'eacol', '--model', 'convmlp-l', '--sync', 'adacomp'],
     "rog sim: --model does not apply to adacomp (the reference systems' runners train the "
     "workload's default model, not convmlp-l); leave --model out"),
    (['sim', '--workload', 'eacol', '--model', 'convmlp-m', '--real-compute', '--sync', 'aet'],
     'rog sim: --model and --real-compute do not apply to aet'),
    (['compare', '--workload', 'eacol', '--model', 'convmlp-l', '--systems', 'bsp,adacomp,gsp'],
     'rog compare: --model does not apply to adacomp, gsp'),
])
def test_model_is_refused_for_a_reference_system(tmp_path, capsys, monkeypatch, argv, message):
    _forbid(monkeypatch)
    out = tmp_path / 'out'
    assert cli.main([*argv, '--out', str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(message) and '\n' not in err
    assert not out.exists()


def test_a_runner_refuses_workload_options_instead_of_dropping_them():
    for system in ('adacomp', 'gsp', 'aet', 'adasgd'):
        with pytest.raises(ValueError, match="trains the workload's defaults"):
            simulate(SimConfig(workload='toy', system=system, workers=1, iterations=1,
                               workload_options={'model': 'convmlp-l', 'surrogate': True}))


BAD_SYSTEMS = [
    ('adacomp:abc', "bad compression ratio in 'adacomp:abc'"),
    ('adacomp:0', 'compression ratio c must be in (0, 1], got 0.0'),
    ('gsp:-1', "the SSP threshold in 'gsp:-1' must be >= 0, got -1"),
    ('aet:x', "bad argument in 'aet:x'"),
    ('localsgd:0', 'local_steps must be >= 1, got 0'),
    ('etsgd:0', 'et_c must be > 0'),
    ('dynsgd:x', "dynsgd takes no argument, got 'dynsgd:x'"),
    ('adasgd:0.5', "adasgd takes no argument, got 'adasgd:0.5'"),
    ('fedavg-async:1', "fedavg-async takes no argument, got 'fedavg-async:1'"),
    ('asp:0', "asp takes no argument, got 'asp:0'"),
    ('asp:99', "asp takes no argument, got 'asp:99'"),
    ('adacomp#alpha=x', "adacomp: bad value 'x' for alpha (float) in tag #alpha=x"),
    ('adacomp#alpha=-1', 'alpha must be positive and finite, got -1.0'),
    ('gsp#bogus=1', "gsp: unknown option 'bogus' in tag #bogus=1; a tag of gsp sets one of "
                    'aggregate, baseline, beta,'),
    ('aet#topology=star', 'topology must be one of'),
    ('adasgd#no-outage', "adasgd: #no-outage is a tag of Rog's engine"),
    ('rog:4#bogus_field=1', "unknown policy field 'bogus_field'"),
]


@pytest.mark.parametrize('system, message', BAD_SYSTEMS)
def test_compare_refuses_a_bad_system_before_any_run(tmp_path, capsys, monkeypatch, system,
                                                     message):
    _forbid(monkeypatch)
    out = tmp_path / 'cmp'
    rc = cli.main(['compare', '--workload', 'toy', '--systems', f'adacomp,gsp,{system}',
                   '--seeds', '0', '--iterations', '2', '--workers', '2', '--jobs', '1',
                   '--evaluations', '1', '--out', str(out)])
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert err.startswith('rog compare: --systems: ') and message in err and '\n' not in err
    assert not out.exists()


@pytest.mark.parametrize('system, message', BAD_SYSTEMS[6:11])
def test_sim_refuses_an_argument_a_system_does_not_take(capsys, monkeypatch, system, message):
    _forbid(monkeypatch)
    assert cli.main(['sim', '--workload', 'toy', '--sync', system]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize('system', ['adacomp#alpha=0.5', 'adacomp:0.1#mylabel', 'gsp#gds=1',
                                    'gsp+gds:2#gds_rule=B', 'asp', 'aet:2#topology=complete',
                                    'localsgd#batch_size=8', 'adasgd#q_size=10#lr=0.01',
                                    'rog:4#deadline_floor=0.5', 'rog:4#no-outage', 'rog:4#run2'])
def test_good_specs_pass_the_check(system):
    assert checks.system('--systems', system) == system


def test_tags_set_the_runners_options_and_explicit_overrides_win():
    class Step:
        lr, momentum = 0.01, 0.9
    assert adacomp.config_for('adacomp', {}, Step).alpha == pytest.approx(0.1)
    assert adacomp.config_for('adacomp#alpha=0.5', {}, Step).alpha == 0.5
    assert adacomp.config_for('adacomp#alpha=0.5', {'alpha': 0.2}, Step).alpha == 0.2
    assert adacomp.options('adacomp#heterogeneity=true#crash-p=0.1', {}) == {
        'heterogeneity': True, 'crash_p': 0.1}
    assert set(adacomp.TAG_KINDS) == set(adacomp_policy.SPEC_OPTIONS)
    assert gsp.config_for('gsp', {}, 2).gds is False
    assert gsp.config_for('gsp#gds=1', {}, 2).gds is True
    assert gsp.config_for('gsp:5#n_groups=none#dis_thr=0.5', {}, 2).ssp_threshold == 5
    assert gsp.config_for('gsp#baseline=bsp', {}, 3).assignment == (0, 0, 0)
    assert aet.parse_system('aet:2#topology=complete#eta0=0.05', {}) == (
        'aet', {'topology': 'complete', 'eta0': 0.05, 'd': 2})
    assert aet.batch_size_of('localsgd#batch_size=8', {}) == 8
    assert aet.batch_size_of('localsgd#batch_size=8', {'batch_size': 4}) == 4
    assert fleet.parse_system('dynsgd#q_size=10', {'lr': 0.1}) == (
        {'q_size': 10.0, 'lr': 0.1}, 'dynsgd')


def test_a_tag_changes_the_run_and_its_summary():
    plain, tagged = _tiny('adacomp'), _tiny('adacomp#alpha=0.5')
    assert plain['alpha'] == pytest.approx(1.0)       # toy: lr 0.1 / (1 - momentum 0.9)
    assert tagged['alpha'] == 0.5
    assert tagged['final_accuracy'] != plain['final_accuracy']
    assert _tiny('gsp#gds=1')['gds'] is True


def test_asp_records_no_staleness_threshold():
    assert _tiny('asp')['staleness'] is None
    assert _tiny('gsp#baseline=asp')['staleness'] is None
    assert _tiny('gsp')['staleness'] == 3
    assert _tiny('gsp:5')['staleness'] == 5


@pytest.mark.parametrize('sync, message', [
    ('gsp', '--staleness does not apply to --sync gsp: the SSP threshold inside its groups '
            'goes in its name, --sync gsp:5 (default 3)'),
    ('gsp+gds:2', '--staleness does not apply to --sync gsp+gds:2: the SSP threshold inside '
                  'its groups goes in its name, --sync gsp+gds:5 (default 3)'),
    ('aet', '--staleness does not apply to --sync aet: the delay checkpoint (rounds a '
            'neighbour may lag) goes in its name, --sync aet:5 (default 1)'),
    ('adacomp', '--staleness does not apply to --sync adacomp (it has no staleness '
                'threshold)'),
])
def test_staleness_points_to_the_systems_own_threshold(capsys, monkeypatch, sync, message):
    _forbid(monkeypatch)
    assert cli.main(['sim', '--workload', 'toy', '--sync', sync, '--staleness', '5']) == 2
    assert capsys.readouterr().err.strip() == f'rog sim: {message}' + (
        '; leave --staleness out' if sync == 'adacomp' else '')


def _documented() -> set:
    """Return every name docs/outputs.md quotes, so that a key it never names is caught."""
    with open(os.path.join(DOCS, 'outputs.md')) as f:
        return set(re.findall(r'`([A-Za-z_0-9]+)`', f.read()))


def _fleet_summary(out, monkeypatch, sync: str) -> dict:
    """Return the summary of a two-robot, four-iteration toy fleet of ``sync``, in process."""
    in_memory_fleet(monkeypatch)
    monkeypatch.setattr(server_node, 'LEAVE_TIMEOUT_S', 0.2)
    args = ['--sync', sync]
    srv, workers = server_and_workers(out, '/keys', 2, args + ['--iterations', '4'], args)
    return run_to_the_end(srv, workers)


def test_every_key_of_a_reference_summary_is_in_outputs_md():
    documented = _documented()
    for system in ('adacomp', 'gsp+gds', 'aet', 'adasgd'):
        missing = sorted(set(_tiny(system)) - documented)
        assert missing == [], f'{system} writes keys docs/outputs.md does not list: {missing}'


@pytest.mark.parametrize('sync', ['rog', 'flown', 'adacomp', 'gsp'])
def test_every_key_of_a_fleet_and_of_its_sim_is_in_outputs_md(tmp_path, monkeypatch, sync):
    documented = _documented()
    before = time.time()
    summary = _fleet_summary(tmp_path, monkeypatch, sync)
    # when the server wrote its results, on this host's clock (fleet.results_complete_at)
    assert before <= summary['results_written_at'] <= time.time(), summary
    fleet_keys = set(summary)
    missing = sorted(fleet_keys - documented)
    assert missing == [], f'a {sync} fleet writes keys docs/outputs.md does not list: {missing}'
    missing = sorted(set(_tiny(f'{sync}:4' if sync in ('rog', 'flown') else sync))
                     - documented)
    assert missing == [], f'rog sim of {sync} writes keys docs/outputs.md does not list: {missing}'


def test_compare_does_not_reuse_a_tagged_run_made_when_tags_were_ignored(tmp_path):
    # Prepare: a finished adacomp#alpha=0.5 run from before the runners applied tags
    from rog_ros.experiments import compare
    from rog_ros.sim.simulator import SimConfig
    cfg = SimConfig(system='adacomp#alpha=0.5', workload='toy', trace='clean', workers=2,
                    iterations=4, evaluations=2)
    summary = {'trace': 'clean', 'workers': 2, 'iteration_budget': 4, 'evaluations': 2,
               'workload_options': {}}
    (tmp_path / 'summary.json').write_text(json.dumps(summary))
    # Execute / Assert: redone; with the tags recorded it is reused; untagged runs always were
    assert 'tags ignored' in compare._other_settings(str(tmp_path), cfg, None)
    summary['option_tags'] = ['alpha=0.5']
    (tmp_path / 'summary.json').write_text(json.dumps(summary))
    assert compare._other_settings(str(tmp_path), cfg, None) is None
    plain = SimConfig(system='adacomp', workload='toy', trace='clean', workers=2, iterations=4,
                      evaluations=2)
    del summary['option_tags']
    (tmp_path / 'summary.json').write_text(json.dumps(summary))
    assert compare._other_settings(str(tmp_path), plain, None) is None
