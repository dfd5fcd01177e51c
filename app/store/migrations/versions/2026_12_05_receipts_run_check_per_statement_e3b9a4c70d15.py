"""Receipts: their run checked once per statement on PostgreSQL, not once per row.

A foreign key checks each inserted row on its own: for every receipt the
server runs a query for its run and locks it (`FOR KEY SHARE`), about a fifth
of what a large `COPY` costs the server per receipt, though a batch's receipts
belong to a few runs. Here the constraint is replaced by
triggers that keep the same rules and locks once per statement:

- an insert or update of receipts looks up the distinct runs its rows name,
  locks them `FOR KEY SHARE` as the foreign key did (a run cannot be deleted,
  nor its id changed, until the writing transaction ends), and fails with the
  foreign key's error (SQLSTATE 23503, constraint `fk_receipts_run_id_runs`)
  when one is missing;
- deleting runs deletes their receipts (the key's `ON DELETE CASCADE`);
  truncating runs (which the router's tables' foreign keys refuse without
  `CASCADE`) deletes every receipt: by `DELETE`, since a `TRUNCATE` from the
  trigger would fail a `TRUNCATE` that names receipts too;
- changing the id of a run that has receipts fails (`NO ACTION`).

SQLite keeps its foreign key: it checks a row in C, for next to nothing.
The functions keep the search path they were created with, so they find
these tables whatever a session's own path (docs/decisions.md, "What a call
writes").

Revision ID: e3b9a4c70d15
Revises: c41e7b2d9a05
Create Date: 2026-12-05 06:00:00.000000+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "e3b9a4c70d15"
down_revision: str | Sequence[str] | None = "c41e7b2d9a05"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FOREIGN_KEY = "fk_receipts_run_id_runs"

CREATE = (
    """
CREATE FUNCTION receipts_run_exists() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    run text;
BEGIN
    FOR run IN SELECT DISTINCT run_id FROM written_receipts LOOP
        PERFORM FROM runs WHERE id = run FOR KEY SHARE;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING
                ERRCODE = 'foreign_key_violation',
                MESSAGE = 'insert or update on table "receipts" violates foreign key '
                    'constraint "fk_receipts_run_id_runs"',
                DETAIL = format('Key (run_id)=(%s) is not present in table "runs".', run),
                TABLE = 'receipts',
                CONSTRAINT = 'fk_receipts_run_id_runs';
        END IF;
    END LOOP;
    RETURN NULL;
END
$$
""",
    """
CREATE TRIGGER receipts_run_exists_on_insert AFTER INSERT ON receipts
REFERENCING NEW TABLE AS written_receipts
FOR EACH STATEMENT EXECUTE FUNCTION receipts_run_exists()
""",
    """
CREATE TRIGGER receipts_run_exists_on_update AFTER UPDATE ON receipts
REFERENCING NEW TABLE AS written_receipts
FOR EACH STATEMENT EXECUTE FUNCTION receipts_run_exists()
""",
    """
CREATE FUNCTION runs_delete_receipts() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    run text;
BEGIN
    FOR run IN SELECT id FROM deleted_runs LOOP
        DELETE FROM receipts WHERE run_id = run;
    END LOOP;
    RETURN NULL;
END
$$
""",
    """
CREATE TRIGGER runs_delete_receipts AFTER DELETE ON runs
REFERENCING OLD TABLE AS deleted_runs
FOR EACH STATEMENT EXECUTE FUNCTION runs_delete_receipts()
""",
    """
CREATE FUNCTION runs_truncate_receipts() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    DELETE FROM receipts;
    RETURN NULL;
END
$$
""",
    """
CREATE TRIGGER runs_truncate_receipts BEFORE TRUNCATE ON runs
FOR EACH STATEMENT EXECUTE FUNCTION runs_truncate_receipts()
""",
    """
CREATE FUNCTION runs_keep_referenced_id() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF EXISTS (SELECT FROM receipts WHERE run_id = OLD.id) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'foreign_key_violation',
            MESSAGE = 'update or delete on table "runs" violates foreign key '
                'constraint "fk_receipts_run_id_runs" on table "receipts"',
            DETAIL = format('Key (id)=(%s) is still referenced from table "receipts".', OLD.id),
            TABLE = 'runs',
            CONSTRAINT = 'fk_receipts_run_id_runs';
    END IF;
    RETURN NULL;
END
$$
""",
    """
CREATE TRIGGER runs_keep_referenced_id AFTER UPDATE OF id ON runs
FOR EACH ROW WHEN (OLD.id IS DISTINCT FROM NEW.id)
EXECUTE FUNCTION runs_keep_referenced_id()
""",
)

DROP = (
    "DROP TRIGGER runs_keep_referenced_id ON runs",
    "DROP FUNCTION runs_keep_referenced_id()",
    "DROP TRIGGER runs_truncate_receipts ON runs",
    "DROP FUNCTION runs_truncate_receipts()",
    "DROP TRIGGER runs_delete_receipts ON runs",
    "DROP FUNCTION runs_delete_receipts()",
    "DROP TRIGGER receipts_run_exists_on_update ON receipts",
    "DROP TRIGGER receipts_run_exists_on_insert ON receipts",
    "DROP FUNCTION receipts_run_exists()",
)


def upgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    op.drop_constraint(FOREIGN_KEY, "receipts", type_="foreignkey")
    for statement in CREATE:
        op.execute(statement)


def downgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    for statement in DROP:
        op.execute(statement)
    op.create_foreign_key(FOREIGN_KEY, "receipts", "runs", ["run_id"], ["id"], ondelete="CASCADE")
