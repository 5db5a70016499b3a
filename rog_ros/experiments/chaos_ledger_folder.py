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
A scenario's ledger folder, read: what the nodes recorded, and whether it balances.

With ``chaos_ledger`` set, every node appends its records to ``LEDGER/worker_<rank>.jsonl`` or
``LEDGER/server.jsonl`` and writes a ``.final.json`` report when it ends
(:mod:`rog_ros.nodes.chaos_ledger` writes and reconciles them). A scenario reads that folder
twice: one file's records while the fleet runs, to time its fault, and the whole folder at the
end, for the verdict with the nodes' reject counts, injected faults and state saves.
"""

from __future__ import annotations

import glob
import json
import os
import time

from rog_ros.nodes import chaos_ledger as lg


def read_ledger(ledger_dir: str) -> tuple:
    """Return (worker records, worker finals, server records, server final, rejects)."""
    records, finals, rejects = {}, {}, {}
    for path in glob.glob(os.path.join(ledger_dir, 'worker_*.jsonl')):
        rank = int(os.path.basename(path)[len('worker_'):-len('.jsonl')])
        with open(path, encoding='utf-8') as fh:
            records[rank] = lg.read_records(fh)
        final = read_json(os.path.join(ledger_dir, f'worker_{rank}.final.json'))
        if final is not None:
            finals[rank] = final
    server_records = []
    path = os.path.join(ledger_dir, 'server.jsonl')
    if os.path.exists(path):
        with open(path, encoding='utf-8') as fh:
            server_records = lg.read_records(fh)
    server_final = read_json(os.path.join(ledger_dir, 'server.final.json'))
    for rep in list(finals.values()) + [server_final or {}]:
        for reason, count in (rep.get('rejects') or {}).items():
            if count:
                rejects[reason] = rejects.get(reason, 0) + int(count)
    return records, finals, server_records, server_final, rejects


def read_json(path: str):
    try:
        with open(path, encoding='utf-8') as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def check_ledger(ledger_dir: str) -> tuple:
    """
    Return (Verdict or None, rejects, injected faults, state-save stats).

    The Verdict is None when the server's final report is missing.
    """
    records, finals, server_records, server_final, rejects = read_ledger(ledger_dir)
    injected, saves = {}, {}
    for name, rep in [(f'worker_{r}', f) for r, f in finals.items()] + [
            ('server', server_final or {})]:
        for k, v in (rep.get('injected') or {}).items():
            injected[k] = injected.get(k, 0) + int(v)
        if rep.get('state'):
            saves[name] = rep['state']
    if server_final is None:
        return None, rejects, injected, saves
    return (lg.reconcile(records, finals, server_records, server_final), rejects, injected,
            saves)


def count_records(path: str, kind: str, run=None) -> int:
    """Count the records of ``kind`` in a ledger file (of process ``run``, or any)."""
    if not os.path.exists(path):
        return 0
    with open(path, encoding='utf-8') as fh:
        return sum(1 for r in lg.read_records(fh)
                   if r['kind'] == kind and (run is None or r.get('run') == run))


def ledger_runs(path: str) -> list:
    if not os.path.exists(path):
        return []
    with open(path, encoding='utf-8') as fh:
        runs = []
        for r in lg.read_records(fh):
            if r.get('run') not in runs:
                runs.append(r.get('run'))
        return runs


def read_ledger_file(path: str) -> list:
    if not os.path.exists(path):
        return []
    with open(path, encoding='utf-8') as fh:
        return lg.read_records(fh)


def wait_new_record(path: str, kind: str, timeout_s: float) -> bool:
    """
    Wait until a record of ``kind`` is appended to the ledger file at ``path``; tell if one was.

    A worker appends its ``computed`` record after it saved its state, right before its push
    leaves (one chunk or three, a few ms to the commit): a fault injected as soon as one is
    seen lands in the middle of that push (worker-restart's kill, the freeze's SIGSTOP).
    """
    size = os.path.getsize(path)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if os.path.getsize(path) > size:
            with open(path, encoding='utf-8') as fh:
                fh.seek(size)
                new = fh.read()
            size += len(new.encode('utf-8'))
            if f'"{kind}"' in new:
                return True
        time.sleep(0.0005)
    return False
