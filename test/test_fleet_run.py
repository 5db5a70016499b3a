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
Acceptance: a real multi-process fleet trains under rog:4, ssp:4 and flown:4.

Server + 3 workers + netmon, separate processes, embedded DDS on loopback, links shaped by a
trace.

Each run gets its own DDS domain and namespace. Asserts: exit status 0 of `rog fleet` (which
requires every node to exit 0), the expected accuracy, the simulator's files with stall and
trigger counts, and that Ctrl-C leaves no node process behind.
"""

import json
import os
from pathlib import Path
import re
import signal
import subprocess
import sys
import time

from no_torch import run_without_torch
import pytest

pytest.importorskip('cyclonedds')

WORKLOAD = os.environ.get('ROG_FLEET_WORKLOAD', 'mpcol')
try:
    from rog_ros.nodes.assembly import load_workload
    _info = load_workload(WORKLOAD).describe()
    # The expected accuracy of a short 3-robot run: half of the accuracy lost to the new
    # environment recovered (issue 4's criterion); the workload's own time-to-target mark
    # (0.55 of the gap, for 4-robot comparisons) needs a longer run.
    TARGET = _info['accuracy_before'] + 0.5 * (_info.get('known_accuracy', 1.0)
                                               - _info['accuracy_before'])
except (ImportError, ValueError, AttributeError, KeyError):
    WORKLOAD = 'toy'   # no accuracy_before: the toy workload has no pre-trained start
    TARGET = 0.8
ITERATIONS = {'toy': 40}.get(WORKLOAD, 100)
FINAL_SLACK = 0.01   # evaluation noise: the final point may dip below a target reached before
RUN_TIMEOUT_S = 150
ROOT = Path(__file__).resolve().parent.parent


def _fleet(out: Path, *args: str, **popen) -> list:
    return [sys.executable, '-m', 'rog_ros.nodes.fleet', '--workload', WORKLOAD,
            '--workers', '3', '--trace', 'indoors', '--out', str(out),
            '--namespace', f'/rog_test_{os.getpid()}_{out.name}', *args]


@pytest.fixture(scope='module', params=['rog', 'ssp', 'flown'])
def run(request, tmp_path_factory):
    """One fleet run per system: (exit status, summary, output dir, seconds, stderr)."""
    out = tmp_path_factory.mktemp(f'fleet_{request.param}')
    t0 = time.monotonic()
    proc = subprocess.run(_fleet(out, '--sync', request.param, '--staleness', '4',
                                 '--iterations', str(ITERATIONS), '--record',
                                 str(out / 'run.mcap')),
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=ROOT)
    seconds = time.monotonic() - t0
    summary = json.loads((out / 'summary.json').read_text()) if proc.returncode == 0 else {}
    return proc.returncode, summary, out, seconds, proc.stderr


def test_fleet_exits_zero_with_every_node(run):
    code, summary, out, seconds, stderr = run
    assert code == 0, stderr[-3000:]
    logs = sorted(p.name for p in (out / 'logs').iterdir())
    assert logs == ['netmon.log', 'rog_server.log', 'rog_worker_0.log', 'rog_worker_1.log',
                    'rog_worker_2.log']
    assert summary['completed'] is True
    assert summary['worker_status_received'] == [0, 1, 2]      # every worker reported in
    # the domain, said with what a ROS 2 shell on this machine needs to see the topics
    assert re.search(r'rog fleet: DDS domain (\d+), this machine only; ROS 2 here sees its '
                     r'topics with ROS_DOMAIN_ID=\1 and ROS_LOCALHOST_ONLY=1 \(Humble\) or '
                     r'ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST', stderr), stderr[:2000]
    print(f'{summary["system"]}: {seconds:.1f} s, accuracy {summary["final_accuracy"]:.4f}')


def test_fleet_reaches_the_expected_accuracy(run):
    code, summary, out, _, stderr = run
    assert code == 0, stderr[-3000:]
    assert summary['workload'] == WORKLOAD
    assert summary['iterations'] == ITERATIONS
    rows = (out / 'timeseries.csv').read_text().splitlines()
    header = rows[0].split(',')
    accuracy = [float(r.split(',')[header.index('accuracy')]) for r in rows[1:]]
    assert len(accuracy) == summary['evaluations'] >= 2
    assert max(accuracy) >= TARGET, accuracy                    # the target was reached
    assert summary['final_accuracy'] >= TARGET - FINAL_SLACK, accuracy
    assert summary['final_accuracy'] > accuracy[0] + 0.05        # training helped


def test_fleet_summary_has_sane_stall_and_trigger_counts(run):
    code, s, _, _, stderr = run
    assert code == 0, stderr[-3000:]
    assert s['system'] in ('rog:4', 'ssp:4', 'flown:4') and s['staleness'] == 4
    assert s['workers'] == 3
    assert isinstance(s['threshold_triggers'], int) and s['threshold_triggers'] >= 0
    assert s['threshold_triggers'] == sum(s['triggers_per_worker'])
    # a worker is held at most once per pull (FLOWN: it may wait for a slot to push too)
    per_iteration = 2 if s['system'].startswith('flown') else 1
    assert max(s['triggers_per_worker']) <= per_iteration * ITERATIONS
    assert 0.0 <= s['stall_time_s'] <= s['sim_time_s']
    assert s['stall_cost'] >= 0.0 and s['compute_time_s'] > 0.0
    assert s['bytes_up'] > 0 and s['bytes_down'] > 0
    assert s['rejects'] == 0
    assert s['authenticated'] is True                 # rog fleet made a key; all verified
    assert not any(s['rejects_by_reason'].values()), s['rejects_by_reason']
    # nothing crashed: no message of a replaced run, no run taken back
    assert s['superseded'] == 0 and s['worker_revivals'] == 0, s
    assert 0 <= s['pull_repeats'] <= 3 * ITERATIONS and 0 <= s['repairs'] <= 3 * ITERATIONS
    # every robot left holding the fleet's final model (model.pt's), none was given up
    assert (s['final_model_delivered'], s['final_model_missed']) == (3, 0)


def test_the_trained_model_is_left_in_the_output_and_is_the_one_evaluated(run):
    # the run's product: OUT/model.pt, a plain state_dict of the consensus model, which
    # evaluates to exactly the summary's final accuracy (the last evaluation saw that model)
    from rog_ros.nodes.assembly import load_workload
    from rog_ros.nodes.model_file import load_trained
    code, s, out, _, stderr = run
    assert code == 0, stderr[-3000:]
    assert s['model_file'] == 'model.pt'
    model = load_trained(WORKLOAD, out / s['model_file'])
    accuracy = load_workload(WORKLOAD).evaluate(model)['accuracy']
    assert accuracy == pytest.approx(s['final_accuracy'], abs=1e-9)


def test_flown_server_schedules_by_netmon_link_reports(run):
    # netmon reports each robot's emulated link (indoors: about 100 Mbit/s, 9-250); FLOWN's
    # server must have them (None: it never heard one and fell back to measured throughput)
    code, s, _, _, stderr = run
    assert code == 0, stderr[-3000:]
    if not s['system'].startswith('flown'):
        assert 'flown_link_mbps' not in s
        return
    assert len(s['flown_link_mbps']) == 3
    assert all(x is not None and 1.0 <= x <= 1000.0 for x in s['flown_link_mbps'])
    assert s['threshold_triggers'] > 0                 # slot waits are counted as stalls


def test_record_writes_a_ros2_mcap_with_the_fleet_topics(run):
    # Prepare
    mcap_reader = pytest.importorskip('mcap.reader')
    decoder = pytest.importorskip('mcap_ros2.decoder')
    code, summary, out, _, stderr = run
    assert code == 0, stderr[-3000:]
    ns = _fleet(out)[_fleet(out).index('--namespace') + 1]
    # Execute: read it back with the mcap reader, decoding CDR from the stored schemas
    with open(out / 'run.mcap', 'rb') as fh:
        reader = mcap_reader.make_reader(fh, decoder_factories=[decoder.DecoderFactory()])
        header = reader.get_header()
        counts, schemas, stops, diag_names = {}, {}, {}, set()
        for schema, channel, _, msg in reader.iter_decoded_messages():
            counts[channel.topic] = counts.get(channel.topic, 0) + 1
            schemas[channel.topic] = (schema.name, schema.encoding, channel.message_encoding)
            if channel.topic.endswith('/schedule'):
                stops[channel.topic] = stops.get(channel.topic, 0) + bool(msg.stop)
            if channel.topic == '/diagnostics':
                diag_names |= {s.name for s in msg.status}
    # Assert
    nodes = ['rog_server'] + [f'rog_worker_{r}' for r in range(3)]
    want = {f'{ns}/status/{n}/train_status': 'rog_ros/msg/TrainStatus' for n in nodes}
    want.update({f'{ns}/w{r}/schedule': 'rog_ros/msg/Schedule' for r in range(3)})
    want[f'{ns}/status/netmon/link_stats'] = 'rog_ros/msg/LinkStats'
    want['/diagnostics'] = 'diagnostic_msgs/msg/DiagnosticArray'
    assert header.profile == 'ros2'
    assert {t: s[0] for t, s in schemas.items()} == want
    assert {s[1:] for s in schemas.values()} == {('ros2msg', 'cdr')}
    # train_status is BEST_EFFORT: the starting model's evaluation can go out before the
    # recorder's reader is discovered (seen with the toy workload, whose start is instant)
    recorded = counts[f'{ns}/status/rog_server/train_status']
    assert summary['evaluations'] - 1 <= recorded <= summary['evaluations']
    assert stops == {f'{ns}/w{r}/schedule': 1 for r in range(3)}   # one stop order each
    assert all(counts[f'{ns}/w{r}/schedule'] >= ITERATIONS // 2 for r in range(3))
    assert {f'{n}: rejects' for n in nodes} | {'rog_server: training'} <= diag_names


def test_ctrl_c_stops_every_node(tmp_path):
    # Prepare: a long run
    from rog_ros.nodes.fleet import BUS_CLOSE_S
    from rog_ros.nodes.supervisor import KILL_WAIT_S, STOP_GRACE_S, TERM_GRACE_S
    out = tmp_path / 'interrupted'
    cmd = _fleet(out, '--sync', 'rog', '--iterations', '100000')
    namespace = cmd[cmd.index('--namespace') + 1]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    # Execute: wait until the nodes run, then Ctrl-C
    deadline = time.monotonic() + 90
    log = out / 'logs' / 'rog_worker_0.log'
    while time.monotonic() < deadline and proc.poll() is None:
        if _node_pids(namespace) and log.exists():
            break
        time.sleep(0.5)
    time.sleep(3.0)
    t_int = time.monotonic()
    proc.send_signal(signal.SIGINT)
    # Bounded: SIGINT, grace, SIGTERM, grace, SIGKILL, whatever the nodes do (plus the
    # progress bus and the interpreter's own exit, however loaded the machine is)
    bound = STOP_GRACE_S + TERM_GRACE_S + KILL_WAIT_S + BUS_CLOSE_S + 10.0
    try:
        _, stderr = proc.communicate(timeout=bound)
    finally:
        if proc.poll() is None:
            proc.kill()
    stop_s = time.monotonic() - t_int
    print(f'stopped {stop_s:.1f} s after SIGINT (bound {bound:.0f} s): '
          f'{stderr.strip().splitlines()[-1]}')
    # Assert
    assert proc.returncode == 130, stderr[-2000:]
    assert 'interrupted' in stderr
    assert _node_pids(namespace) == []
    assert stop_s < bound
    summary = json.loads((out / 'summary.json').read_text())    # written from what exists
    assert summary['completed'] is False and 'interrupted' in summary['error']


def _node_pids(namespace: str) -> list:
    """Live processes whose command line names ``namespace`` (the fleet's nodes)."""
    pids = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmd = Path(f'/proc/{entry}/cmdline').read_bytes().split(b'\0')
        except OSError:
            continue
        if b'rog_ros.nodes' in b' '.join(cmd) and namespace.encode() in cmd:
            pids.append(int(entry))
    return pids


def test_a_diverging_run_ends_with_the_reason_instead_of_computing_for_ever(tmp_path):
    # A learning rate far too high: every gradient non-finite. Each was dropped and computed
    # again for ever (a fleet at iteration 1 after minutes); now a worker gives up after
    # NONFINITE_LIMIT in a row, exits 3 with the reason (not restarted by respawn), and the
    # fleet stops with it.
    if WORKLOAD == 'toy':
        pytest.skip('the toy workload has no learning rate that overflows')
    out = tmp_path / 'diverged'
    t0 = time.monotonic()
    proc = subprocess.run(_fleet(out, '--lr', '1e12', '--iterations', '30'),
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=ROOT)
    assert proc.returncode == 1, proc.stderr[-2000:]
    from rog_ros.protocol.worker import NONFINITE_LIMIT
    assert (f'training diverged: {NONFINITE_LIMIT} non-finite gradients in a row'
            in proc.stderr)
    assert 'lower the learning rate' in proc.stderr
    # (whichever gave up first)
    assert re.search(r'rog_worker_\d exited with status 3', proc.stderr)
    assert _node_pids(f'/rog_test_{os.getpid()}_diverged') == []
    print(f'stopped {time.monotonic() - t0:.1f} s after the start')


_FLEET = """
from rog_ros.nodes.fleet import main
sys.exit(main(sys.argv[1:]))
"""


def test_the_fleet_process_itself_never_imports_torch(tmp_path):
    # It supervises the nodes for the whole run and trains nothing: the workload is prepared
    # in a child (nodes.prepare_workload), the nodes are processes of their own.
    out = tmp_path / 'fleet_no_torch'
    argv = _fleet(out, '--sync', 'rog', '--iterations', '10')[3:]     # after '-m', module
    proc = run_without_torch(_FLEET, *argv, timeout=RUN_TIMEOUT_S, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((out / 'summary.json').read_text())['completed'] is True


def test_a_workload_that_cannot_be_prepared_stops_the_fleet_in_one_line():
    from rog_ros.nodes.prepare_workload import prepare
    assert prepare('toy') is None
    why = prepare('no-such-workload')
    assert why.startswith("unknown workload 'no-such-workload'") and '\n' not in why
