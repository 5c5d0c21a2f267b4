"""The one DuckDB file, one job a module: opening it (`opening`), waiting while another holds it (`waiting`), its
schema and software history (`schema`), transactions, damage found (`integrity`), failures explained (`failures`),
its path checked (`path`) and temporary tables loaded in bulk (`bulk_load`). Callers import from here."""

from a2x_local.db.bulk_load import load_temp_table
from a2x_local.db.failures import damaged, is_lock_error, translate
from a2x_local.db.integrity import HEADER_BYTES, damage, verify_blocks
from a2x_local.db.opening import Mode, connect, open_database
from a2x_local.db.path import check_db_path
from a2x_local.db.schema import migrate, migrations, schema_version, software_history
from a2x_local.db.transactions import transaction
from a2x_local.db.waiting import IN_PROCESS_WAIT_S, NO_EXTENSIONS, SPEAK_EVERY_S, connect_when_free, held_in_process

__all__ = [
    "HEADER_BYTES",
    "IN_PROCESS_WAIT_S",
    "NO_EXTENSIONS",
    "SPEAK_EVERY_S",
    "Mode",
    "check_db_path",
    "connect",
    "connect_when_free",
    "damage",
    "damaged",
    "held_in_process",
    "is_lock_error",
    "load_temp_table",
    "migrate",
    "migrations",
    "open_database",
    "schema_version",
    "software_history",
    "transaction",
    "translate",
    "verify_blocks",
]
