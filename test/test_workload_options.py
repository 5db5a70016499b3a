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
"""--workload-option: parsed, checked against the builder, and passed to the runs."""

import json
import os

import pytest
from rog_ros import cli
from rog_ros.workloads import options
from test_workloads_eacol import _write_cifar      # the official folder layout, random images


def test_values_are_read_as_literals_or_text_and_survive_json():
    given = options.parse_all(['size=48', 'lr=1e-3', 'surrogate=true', 'hidden=400,256',
                               'known=("maze", "rooms")', 'dataset=cifar100',
                               'data_dir=~/data', 'target_accuracy=none', 'note={1: 2}',
                               'corruption=[("blur", 3), ("fog", 2)]'])
    assert given == {'size': 48, 'lr': 0.001, 'surrogate': True, 'hidden': [400, 256],
                     'known': ['maze', 'rooms'], 'dataset': 'cifar100',
                     'data_dir': os.path.expanduser('~/data'), 'target_accuracy': None,
                     'note': '{1: 2}', 'corruption': [['blur', 3], ['fog', 2]]}
    # rog compare reuses a run only if the recorded options are equal to the given ones
    assert json.loads(json.dumps(given)) == given


@pytest.mark.parametrize('texts, taken, message', [
    (['size'], None, "'size' is not KEY=VALUE"),
    (['=3'], None, 'is not KEY=VALUE'),
    (['two words=3'], None, 'is not KEY=VALUE'),
    (['size=4', 'size=5'], None, 'size is given twice'),
    (['model=convmlp-s'], {'model': '--model'}, 'model is set by --model already'),
])
def test_malformed_options_are_refused(texts, taken, message):
    with pytest.raises(ValueError, match=message):
        options.parse_all(texts, taken)


@pytest.mark.parametrize('given, message', [
    ({'sise': 48}, "mpcol takes no option 'sise'; it takes adapt_maps, batch_size"),
    ({'size': 'big'}, "size='big': expected an integer .default 32."),
    ({'size': 4.5}, 'expected an integer'),
    ({'lr': 'fast'}, 'expected a number'),
    ({'hidden': 'wide'}, "hidden='wide': expected a comma-separated list of integers"),
    ({'hidden': 'a,b'}, 'expected a comma-separated list of integers .default .400, 256..'),
    ({'known': [1, 2]}, 'expected a comma-separated list of texts'),
    ({'known': 'clutter,,rooms'}, 'expected a comma-separated list of texts'),
    ({'new': 3}, 'expected a text'),
])
def test_options_are_checked_against_the_builder(given, message):
    with pytest.raises(ValueError, match=message):
        options.check('mpcol', given)


@pytest.mark.parametrize('texts, expected', [
    (['known=clutter,pillars'], {'known': ['clutter', 'pillars']}),
    (['known=clutter, pillars , rooms'], {'known': ['clutter', 'pillars', 'rooms']}),
    (['known=maze'], {'known': ['maze']}),                      # one item: a list of one
    (['hidden=512'], {'hidden': [512]}),
    (['hidden=64,32'], {'hidden': [64, 32]}),
    (['hidden=[64, 32]', 'new=caves'], {'hidden': [64, 32], 'new': 'caves'}),
    (['known=~/a,~/b'], {'known': [os.path.expanduser('~/a'), os.path.expanduser('~/b')]}),
])
def test_lists_are_given_as_comma_separated_words_or_one_item(texts, expected):
    given = options.parse_all(texts)
    options.check('mpcol', given)
    assert given == expected


@pytest.mark.parametrize('text, expected', [
    ('new=20261204', '20261204'),        # a folder named by its date: the text as typed
    ('new=1e3', '1e3'), ('new=0x10', '0x10'), ('new=1_000', '1_000'),
    ("new='42'", '42'),                  # quoted: a text already
    ('new=caves', 'caves'),
])
def test_a_number_given_for_a_text_option_is_the_text_as_typed(text, expected):
    given = options.parse_all([text])
    options.check('mpcol', given, [text])
    assert given == {'new': expected}


def test_a_number_for_a_text_option_is_refused_without_the_typed_texts():
    # (what a caller that has only the parsed values gets: the kind check, as before)
    with pytest.raises(ValueError, match='new=20261204: expected a text'):
        options.check('mpcol', {'new': 20261204})


def test_a_refused_option_leaves_the_given_ones_as_they_were():
    given = {'known': 'clutter,pillars', 'size': 'big'}
    with pytest.raises(ValueError, match="size='big'"):
        options.check('mpcol', given)
    assert given == {'known': 'clutter,pillars', 'size': 'big'}


def test_the_command_line_passes_a_list_of_words_to_the_run(tmp_path, capsys, monkeypatch):
    from rog_ros.sim import simulator
    seen = []

    def stop(cfg, **kwargs):
        """Record the options a run would get, and start none."""
        seen.append(cfg.workload_options)
        raise ValueError('stopped before the run')
    monkeypatch.setattr(simulator, 'simulate', stop)
    assert cli.main(['sim', '--workload', 'mpcol', '--workload-option', 'known=clutter,pillars',
                     '--workload-option', 'hidden=512,256']) == 2
    assert seen == [{'known': ['clutter', 'pillars'], 'hidden': [512, 256]}]
    assert capsys.readouterr().err.strip() == 'rog sim: stopped before the run'


@pytest.mark.parametrize('workload, option, message', [
    ('toy', 'features=-5', 'toy: features=-5: expected an integer with 1 <= features <= '),
    ('toy', 'pool=99999999999999999999', 'toy: pool=99999999999999999999: expected an '
                                         'integer with 1 <= pool <= 1000000000'),
    ('toy', 'noise=-1.5', 'toy: noise=-1.5: expected a number with 0 <= noise'),
    ('mpcol', 'size=-3', 'mpcol: size=-3: expected an integer with 16 <= size <= 256'),
    ('mpcol', 'hidden=512', 'mpcol: hidden=[512]: expected two widths, e.g. hidden=400,256'),
    ('mpcol', 'known=clutter,lava', "mpcol: known='lava': expected one of 'clutter', "),
    ('mpcol', 'momentum=1', 'mpcol: momentum=1: expected a number with 0 <= momentum < 1'),
    ('eacol', 'partition=bogus', "eacol: partition='bogus': expected one of 'shards', "
                                 "'dirichlet', 'pachinko', 'clients'"),
    ('eacol', 'corruption=bogus', "eacol: corruption='bogus': unknown corruption 'bogus'; "
                                  'expected a preset (fog, blur, fog+blur, mixed)'),
    ('eacol', 'corruption=blur:x', "eacol: corruption='blur:x': invalid literal"),
    ('eacol', 'data_dir=/x', "eacol: data_dir is read by dataset='cifar100' only, not by "
                             "dataset='objects' (the built-in images): add dataset=cifar100, "
                             'or leave data_dir out'),
    ('eacol', 'train_h5=/x.h5', "eacol: train_h5 is read by dataset='fed-cifar100' only"),
])
def test_a_value_out_of_range_is_one_line_before_any_data_is_made(tmp_path, capsys, monkeypatch,
                                                                  workload, option, message):
    from rog_ros.workloads import cache

    def forbidden(*args, **kwargs):
        """Fail the test: a refused option must not reach the data."""
        raise AssertionError('data was built for a refused option')
    monkeypatch.setattr(cache, 'load_or_build', forbidden)
    monkeypatch.setenv('ROG_CACHE_DIR', str(tmp_path / 'cache'))
    out = tmp_path / 'run'
    assert cli.main(['sim', '--workload', workload, '--workload-option', option,
                     '--iterations', '1', '--out', str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f'rog sim: {message}') and '\n' not in err
    assert not out.exists()


def test_options_the_builder_takes_pass():
    options.check('mpcol', {'size': 48, 'lr': 1, 'hidden': [64, 32], 'target_accuracy': 0.8})
    options.check('eacol', {'dataset': 'cifar100', 'data_dir': '/data', 'surrogate': True,
                            'corruption': [['blur', 3]]})


def test_a_simulated_run_trains_on_a_local_cifar100_copy(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv('ROG_CACHE_DIR', str(tmp_path / 'cache'))
    (tmp_path / 'data').mkdir()
    _write_cifar(tmp_path / 'data', 200, 60)
    out = tmp_path / 'run'
    assert cli.main(['sim', '--workload', 'eacol', '--sync', 'bsp', '--workers', '2',
                     '--iterations', '2', '--evaluations', '2',
                     '--workload-option', 'dataset=cifar100',
                     '--workload-option', f'data_dir={tmp_path / "data"}',
                     '--workload-option', 'pretrain_steps=2',
                     '--workload-option', 'eval_samples=40', '--out', str(out)]) == 0
    summary = json.loads((out / 'summary.json').read_text())
    assert summary['workload_options'] == {'dataset': 'cifar100',
                                           'data_dir': str(tmp_path / 'data'),
                                           'pretrain_steps': 2, 'eval_samples': 40}
    assert summary['iterations'] == 2
    # CIFAR-100's 100 classes: the built-in objects' 20-class head (288,972 parameters) has
    # 80 x 129 fewer, so this run trained on the local copy, not on the default data
    assert summary['params'] == 288_972 + 80 * 129
    printed = json.loads(capsys.readouterr().out)
    assert printed['workload_options'] == summary['workload_options']


@pytest.mark.parametrize('extra, message', [
    (['--workload-option', 'sise=48'], "--workload-option: mpcol takes no option 'sise'"),
    (['--workload-option', 'size=big'], "--workload-option: size='big': expected an integer"),
    (['--sync', 'adacomp', '--workload-option', 'size=48'],
     '--workload-option does not apply to adacomp'),
    (['--workload', 'eacol', '--workload-option', 'model=convmlp-m'],   # not hours of compute
     '--workload-option model=convmlp-m: give the EACOL model with --model'),
])
def test_a_refused_option_runs_nothing_and_writes_nothing(tmp_path, capsys, monkeypatch,
                                                          extra, message):
    from rog_ros.sim import simulator

    def forbidden(*args, **kwargs):
        raise AssertionError('a refused option started a run')
    monkeypatch.setattr(simulator, 'simulate', forbidden)
    out = tmp_path / 'run'
    assert cli.main(['sim', '--workload', 'mpcol', *extra, '--out', str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f'rog sim: {message}') and '\n' not in err
    assert not out.exists()


def test_compare_refuses_an_option_for_a_reference_system(tmp_path, capsys):
    assert cli.main(['compare', '--systems', 'bsp,gsp', '--workload-option', 'size=48',
                     '--out', str(tmp_path / 'cmp')]) == 2
    assert 'rog compare: --workload-option does not apply to gsp' in capsys.readouterr().err
    assert not (tmp_path / 'cmp').exists()


def test_an_eacol_dataset_without_its_files_is_one_line(tmp_path, capsys):
    assert cli.main(['sim', '--workload', 'eacol', '--workload-option', 'dataset=cifar100',
                     '--workload-option', f'data_dir={tmp_path}']) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f'rog sim: {tmp_path}: no CIFAR-100 here (train and meta missing')
