"""The journal: every durable write of receipts, runs, audit rows, cache entries
and idempotency keys, from the engine's objects to committed rows.

- `writer`: the group commit, what the service submits and awaits;
- `queue`: what it holds until the next transaction, and how a `Batch`
  (`batch`) is taken from it;
- `outage`: a batch retried through a short outage;
- `backend`: the database's side, one chosen at start-up: `sqlite/` and
  `postgres/`, each with its encodings, its in-process path and its writer
  process (`process`: what the two processes share);
- `rows`: the tables' layouts and encodings; `records` and `events`: the
  engine's receipts, cache entries and audit events as rows;
- `session`: a batch in a session's transaction (the one insert path of
  receipts, tests' seeds included), and the look after a lost answer.

Group commit: receipts, their cache entries and audit events share transactions.

The engine submits a receipt and goes on; the writer collects whatever arrived
while the previous transaction was committing (plus a short linger) and writes
it in one transaction, then resolves that transaction's future, which every
receipt in it shares. A plan answers only after its own futures resolved, so a
receipt is durable before it is reported, yet concurrent plans never pay one
commit per call. Each transaction is one turn of take -> write (retried through
a short outage: `app.store.journal.outage`) -> resolve; what it is written with
is the backend chosen when the writer is made (`app.store.journal.backend`).

The backlog (receipts and audit rows not yet written) is bounded: past
`max_backlog`, `room()` tells the engine to hold new calls until the writer
has drained it to half. Receipts of calls already running are still accepted,
so the backlog never exceeds the bound by more than the calls in flight.
While the writer has work, every `turn_every`-th call start waits one turn of
the event loop (`room()`), so a long plan of calls that never wait cannot keep
the writer from sending earlier batches until it ends.

The linger is spent only while at least `linger_min_open_runs` runs are open
(started through the writer, their ends not yet written): it waits for rows
that could share the commit, and a lone run has no one to wait for; a few runs
bring too little company to pay for the wait. Without a linger the writer still
lets the loop turn once before it takes a transaction: a quick call's
`call.started` wakes it, and the call's receipt, its `call.finished` and the
run's end come in that turn; taken at once, the start alone was one more commit
for a lone plan to wait for.

A call's `call.started` and `call.finished` events that fall in one
transaction share one audit row (`app.store.journal.events`); a crash cannot
separate them, since what one transaction writes commits whole or not at all.

On SQLite, once the WAL checkpointer (`wal`) finds the WAL long, the next batch
waits for one checkpoint pass before it is taken, so that its transaction
starts the WAL over (`app.store.journal.sqlite.checkpoints`); rows that come in
meanwhile join it. Each committed batch is noted to the checkpointer, whose
passes come often only while commits do.

A run started under an idempotency key is queued with the key's claim
(`claim_run`): the key and the run are written first in their transaction,
the run only if the key was claimed (new, or expired), and a held key fails
nothing else; each claim learns from a future of its own whether it claimed.
The key's answer can join the transaction of the run's end (`end_run_with`),
so the two commit together.
"""
