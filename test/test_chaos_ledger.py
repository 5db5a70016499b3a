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
The independent ledger of `rog chaos`: exact runs reconcile, planted faults are caught.

A small fp32 replica of what workers and server do (residual += d; on a final ack residual
-= q; server w -= q lr / N) writes the records the nodes write; the ledger must find 0 lost and
0 duplicated on it, and must flag a lost push, a doubled push, a lost row, a residual dropped
by a restart, and a server restore that forgot a push.
"""

import os

from rog_ros.nodes import chaos_ledger as ledger
import torch

N_PARAMS, ROWS, WORKERS, ITERS, LR = 4096, 32, 3, 60, 0.1


def _replica(plant=None, seed=0):
    """Run the fp32 replica; return reconcile()'s arguments."""
    g = torch.Generator().manual_seed(seed)
    proj = ledger.projections(N_PARAMS)
    w0 = 0.05 * torch.randn(N_PARAMS, generator=g)
    w = w0.clone()
    drift = 0.02 * torch.randn(N_PARAMS, generator=g)
    scale = WORKERS / LR
    records, finals, server = {}, {}, []

    def rec(rank, kind, vec, **fields):
        recs = records.setdefault(rank, [])
        text = ledger.line(kind, run=100 + rank, seq=len(recs), proj=ledger.project(vec, proj),
                           **fields)
        recs += ledger.read_records([text])

    def apply(rank, tid, q, weight=None, said=None):
        # weight: outage-aware RSP's late-push weight (the rest is discarded on purpose);
        # said: the weight the server records (a planted mismatch when it differs)
        nonlocal w
        before = w.clone()
        w = w - q * (LR / WORKERS) * (1.0 if weight is None else weight)
        fields = {} if weight is None else {'weight': weight if said is None else said}
        server.append(ledger.read_records([ledger.line(
            'applied', rank=rank, incarnation=7, tid=tid,
            proj=ledger.project((before.double() - w.double()) * scale, proj), **fields)])[0])

    for r in range(WORKERS):
        res = torch.zeros(N_PARAMS)
        for t in range(ITERS):
            d = drift + 0.05 * torch.randn(N_PARAMS, generator=g)
            new = res + d
            rec(r, 'computed', new.double() - res.double(), clock=t + 1)
            res = new
            if plant == 'restart_drops_residual' and r == 1 and t == 20:
                res = torch.zeros(N_PARAMS)          # restored nothing
            if plant == 'checkpoint_forgets' and r == 0 and t == 50:
                server.append({'kind': 'checkpoint', 'id': 3})
            rows = torch.rand(ROWS, generator=g) < 0.6                 # rows this push carried
            mask = rows.repeat_interleave(N_PARAMS // ROWS)
            size = res.abs().view(ROWS, -1).mean(1).repeat_interleave(N_PARAMS // ROWS)
            q = torch.where(mask, size * torch.sign(res), torch.zeros(()))   # scaled sign
            q_applied = q.clone()
            if plant == 'lost_row' and r == 1 and t == 30:
                q_applied[mask.nonzero()[0]] = 0.0      # one element of one row never applied
            if plant in ('weighted_push', 'weighted_wrong') and r == 2 and t == 35:
                apply(r, t + 1, q_applied, 0.25, 0.5 if plant == 'weighted_wrong' else None)
            elif not (plant == 'lost_push' and r == 2 and t == 40):
                apply(r, t + 1, q_applied)
            if plant == 'doubled_push' and r == 0 and t == 10:
                apply(r, t + 1, q_applied)
            if plant == 'checkpoint_forgets' and r == 0 and t == 55:
                server.append({'kind': 'restore', 'id': 3})   # pushes 52..56 rolled back
            before = res
            res = res - q
            rec(r, 'commit', before.double() - res.double(), incarnation=7, tid=t + 1)
        finals[r] = {'held': ledger.project(res, proj).tolist(), 'inflight': None,
                     'residual_max': float(res.abs().max())}
    if plant == 'checkpoint_forgets':
        server[:] = [x for x in server if x['kind'] != 'applied' or x['rank'] != 0
                     or not 51 <= x['tid'] <= 56 or x is server[-1]]
    server_final = {'applied': ledger.project((w0.double() - w.double()) * scale, proj),
                    'n_params': N_PARAMS, 'scale': scale,
                    'weight_max': max(float(w0.abs().max()), float(w.abs().max()))}
    if plant == 'checkpoint_forgets':
        server_final['applied'] = sum(
            (torch.tensor(x['proj']) for x in ledger.valid_applied(server)),
            torch.zeros(ledger.CHANNELS)).tolist()
    return records, finals, server, server_final


def test_an_exact_run_reconciles_within_the_fp32_tolerance():
    verdict = ledger.reconcile(*_replica())
    assert verdict.ok, verdict.problems
    assert verdict.entries == WORKERS * ITERS and verdict.pushes == WORKERS * ITERS


def test_a_weighted_late_push_is_discarded_on_purpose_not_lost():
    # outage-aware RSP applies a suspended worker's late push at weight 1/(1 + tau - S)
    verdict = ledger.reconcile(*_replica('weighted_push'))
    assert verdict.ok, verdict.problems
    assert 0.1 < verdict.discarded < 2               # 3/4 of one push, in iteration units
    exact = ledger.reconcile(*_replica())
    assert exact.discarded == 0


def test_a_weight_the_server_did_not_apply_is_caught():
    verdict = ledger.reconcile(*_replica('weighted_wrong'))
    assert verdict.lost > 0.1, verdict.problems
    assert any('applied differs' in p for p in verdict.problems)


def test_a_lost_push_is_lost():
    verdict = ledger.reconcile(*_replica('lost_push'))
    assert 0.1 < verdict.lost < 2 and verdict.duplicated == 0, verdict.problems


def test_a_doubled_push_is_duplicated():
    verdict = ledger.reconcile(*_replica('doubled_push'))
    assert 0.1 < verdict.duplicated < 2 and verdict.lost == 0, verdict.problems


def test_one_lost_element_of_one_row_is_found():
    verdict = ledger.reconcile(*_replica('lost_row'))
    assert verdict.lost > 0 and verdict.duplicated == 0, verdict.problems
    assert verdict.lost < 0.1


def test_a_restart_that_drops_the_residual_is_a_loss():
    verdict = ledger.reconcile(*_replica('restart_drops_residual'))
    assert verdict.lost > 0.1, verdict.problems


def test_a_server_restore_that_forgets_pushes_is_a_loss():
    verdict = ledger.reconcile(*_replica('checkpoint_forgets'))
    assert verdict.lost > 0.1 and verdict.duplicated == 0, verdict.problems
    assert any('never applied' in p for p in verdict.problems)


def test_a_push_resent_under_a_new_key_balances_and_inflight_overlap_is_allowed():
    records, finals, server, final = _replica()
    # the server applied push 60 of worker 2 but the worker stopped before its final ack:
    # its commit record is missing and the push is its in-flight one
    last = [r for r in records[2] if r['kind'] == 'commit' and r['tid'] == 60][0]
    records[2].remove(last)
    finals[2]['held'] = (torch.tensor(finals[2]['held'], dtype=torch.float64)
                         + torch.tensor(last['proj'])).tolist()
    assert not ledger.reconcile(records, finals, server, final).ok
    finals[2]['inflight'] = ledger.push_key(2, 7, 60)
    assert ledger.reconcile(records, finals, server, final).ok
    # worker 1's push 5 reached the server as transfer 1005 (re-sent after a restart)
    for x in server:
        if x['rank'] == 1 and x['tid'] == 5:
            x['tid'] = 1005
    assert ledger.reconcile(records, finals, server, final).ok


def test_torn_lines_and_repeated_records_are_ignored():
    text = ledger.line('computed', run=1, seq=0, clock=3, proj=[1.0, 2.0, 3.0, 4.0, 5.0])
    recs = ledger.read_records([text, text, text[:-9], 'junk'])
    assert len(recs) == 2                     # the torn line and the junk are skipped
    final = {'applied': [0.0] * 5, 'n_params': 8, 'scale': 1.0, 'weight_max': 1.0}
    verdict = ledger.reconcile({0: recs}, {0: {'held': [1.0, 2.0, 3.0, 4.0, 5.0],
                                               'inflight': None}}, [], final)
    assert verdict.ok and verdict.entries == 1     # counted once


def test_a_link_outage_run_that_missed_its_scenario_is_planned_again(tmp_path, monkeypatch):
    # The outage sits at a fixed trace time within a fixed budget; a slow machine's fleet can
    # start training after it began, a fast one's finish before it ended. Such a failed run
    # is run again, planned from what it measured.
    from rog_ros.experiments import chaos_fleet, chaos_link_outage
    plans = []

    def fake_run(cfg, plan, seen):
        plans.append(dict(plan))
        os.makedirs(os.path.join(cfg.out, 'link-outage'), exist_ok=True)
        with open(os.path.join(cfg.out, 'link-outage', 'attempt'), 'w') as fh:
            fh.write(str(len(plans)))
        seen.update(measured)
        return {'outcome': 'failed' if len(plans) == 1 else 'ok', 'detail': 'held'}

    monkeypatch.setattr(chaos_link_outage, '_link_outage_from', fake_run)
    cfg = chaos_fleet.ChaosConfig(out=str(tmp_path), outage_s=6.0, iterations=16)
    first = {'start_s': chaos_link_outage.LINK_OUTAGE_START_S, 'iterations': 80 + 30 * 6}
    # began training 3 s after the outage did, 3 s of it left: the outage moves 8 s past that
    # start (a budget for 1.5 x (19 + 6 + 8 - 11) / 0.15 = 220 iterations: the first one's 260)
    measured = {'training_s': 11.0, 'end_s': 40.0, 'period_s': 0.15}
    row = chaos_link_outage.link_outage(cfg)
    assert plans == [first, {'start_s': 19.0, 'iterations': 260}]
    assert row['outcome'] == 'ok' and row['replanned']['first_detail'] == 'held'
    with open(tmp_path / 'link-outage.first' / 'attempt') as fh:
        assert fh.read() == '1'
    # finished 0.5 s after the outage at 0.02 s an iteration: a budget for 1.5x that pace
    # from the start to 8 s after the outage
    plans.clear()
    measured = {'training_s': 3.0, 'end_s': 14.5, 'period_s': 0.02}
    chaos_link_outage.link_outage(cfg)
    assert plans[1]['start_s'] == 8.0
    assert 1425 <= plans[1]['iterations'] <= 1426       # 1.5 x (8 + 6 + 8 - 3) / 0.02
    # trained through the outage, or began inside it with 4.5 s of it left (a robot dead from
    # its start: stop 51's case, a server bug): a failure stands, nothing is run again
    for training_s in (3.0, 9.5):
        plans.clear()
        measured = {'training_s': training_s, 'end_s': 30.0, 'period_s': 0.07}
        row = chaos_link_outage.link_outage(cfg)
        assert plans == [first] and row['outcome'] == 'failed' and 'replanned' not in row
