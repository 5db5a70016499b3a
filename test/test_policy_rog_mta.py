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
"""Rog's MTA: the exact root for an S + 1 trigger; the infinite-urgency rule keeps RSP safe."""

from protocol_fixtures import build
import pytest
from rog_ros.protocol.policies import make_policy

SLOW = 1     # worker 1 has the slowest link below


def _run(rule, compensation=False):
    # (momentum as the workers set it: with compensated momentum the quadratic's gradients
    # leave more rows at infinite urgency, which the safety test below covers as well)
    # (late rows and pulls off: the transfers measured here are the MTA rule's, the paper's;
    # outage-aware RSP off: the straggler paces the fleet instead of being suspended, as
    # the MTA argument assumes; with it on, the run's length is the suspension's story;
    # straggler slack off: it would lower the straggler's MTA, test_straggler_slack.py)
    pol = make_policy('rog:4', deadline_floor=0.0, rtt_floor=0.0,   # straggler sends its MTA
                      mta_rule=rule, momentum_compensation=compensation, late_rows=False,
                      late_pulls=False, outage_aware=False, straggler_slack=False)
    # per-tensor codec: the row codec's 4 scale bytes per row (x3 on this model's 10-value
    # rows) change which rows the 0.02 Mbit/s straggler fits; its safety is tested below
    harness, server, workers, _, layout = build(
        'rog:4', policy=pol, iters=30, bandwidths=(1e6, 0.02e6, 2e6, 0.3e6),
        codec='sign' if not compensation else 'row')
    harness.log_events = True
    stats = harness.run()
    pushes = [(t, a.value / layout.n_rows) for t, node, a in stats.logs
              if a.name == 'push_done' and node == SLOW]
    # time its first 5 pushes: every worker's last push goes whole, which at 0.02 Mbit/s
    # takes longer than the rest of the run
    harness.paced_until = pushes[4][0]
    return harness, workers, [f for _, f in pushes[:-1]]


def test_rog_defaults_to_the_root_for_its_trigger_convention():
    # (1 - P)^S = P: the MTA argument redone for a trigger at staleness S + 1 ('gt').
    for s in (2, 4, 20):
        p = make_policy(f'rog:{s}').mta
        assert (1 - p) ** s == pytest.approx(p, abs=1e-6)
    assert make_policy('rog:4').mta == pytest.approx(0.27551, abs=1e-5)
    assert make_policy('rog:0').mta == 1.0
    assert make_policy('rog:4', mta_rule='paper_table').mta == 0.32   # the paper's Table 1


@pytest.mark.parametrize('rule, mta', [('exact_root_shifted', 0.27551), ('round_robin', 0.2)])
def test_straggler_sends_less_and_never_violates_its_own_rows(rule, mta):
    harness, workers, fractions = _run(rule)
    s = workers[0].policy.staleness
    assert all(w.followups == 0 for w in workers)          # no row reached S + 1 unsent
    assert all(int(w.withheld.max()) <= s for w in workers)
    assert min(fractions) >= mta - 1e-3                      # never below the MTA
    paper, _, paper_fractions = _run('paper_table')
    assert min(paper_fractions) >= 0.32 - 1e-9
    mean = sum(fractions) / len(fractions)
    assert mean < sum(paper_fractions) / len(paper_fractions) - 0.01
    assert harness.paced_until < paper.paced_until           # the straggler paces the fleet


def test_rsp_safety_holds_with_compensated_momentum():
    harness, workers, fractions = _run('exact_root_shifted', compensation=True)
    assert all(int(w.withheld.max()) <= 4 for w in workers)
    assert min(fractions) >= 0.27551 - 1e-3
    paper, _, _ = _run('paper_table', compensation=True)
    assert harness.now < paper.now                # measured 21.7 s against 22.7 s
