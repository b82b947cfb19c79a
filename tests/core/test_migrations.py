from __future__ import annotations

from pathlib import Path

from sqlalchemy import create_engine, inspect

from core.db import make_engine
from core.migrate import alembic_config, downgrade, upgrade
from core.models import Base


def test_schema_matches_the_models_on_both_databases(database_url: str) -> None:
    """The migrated schema has every table and column the models declare."""
    engine = make_engine(database_url)
    try:
        inspector = inspect(engine)
        for table in Base.metadata.sorted_tables:
            columns = {c["name"] for c in inspector.get_columns(table.name)}
            assert columns == {c.name for c in table.columns}, table.name
    finally:
        engine.dispose()


def test_autogenerate_finds_nothing_to_do(database_url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    engine = make_engine(database_url)
    try:
        with engine.connect() as connection:
            diff = compare_metadata(MigrationContext.configure(connection), Base.metadata)
        assert diff == []
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cycle.db'}"
    upgrade(url)
    downgrade(url)
    engine = create_engine(url)
    assert set(inspect(engine).get_table_names()) == {"alembic_version"}
    engine.dispose()
    upgrade(url)
    engine = create_engine(url)
    assert "jobs" in inspect(engine).get_table_names()
    engine.dispose()
    assert alembic_config(url).get_main_option("script_location", "").endswith("migrations")
