#!/bin/sh
# Temporal's two databases on the compose file's PostgreSQL, their schemas brought to
# this admin-tools image's version. Run by the `temporal-schema` service before the
# server starts, on every `docker compose --profile temporal up`: safe to run again.
set -eu

schemas=/etc/temporal/schema/postgresql/v12
sql() {
  temporal-sql-tool --plugin postgres12 --ep postgres -p 5432 -u "$POSTGRES_USER" "$@"
}

for pair in temporal:temporal temporal_visibility:visibility; do
  database=${pair%%:*}
  schema=${pair#*:}
  # `create` fails once the database exists; any other failure shows in the steps after it.
  sql --db "$database" create || echo "database $database: kept"
  sql --db "$database" setup-schema -v 0.0
  sql --db "$database" update-schema -d "$schemas/$schema/versioned"
done
echo "Temporal schemas ready"
