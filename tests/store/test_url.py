"""open_store: the store a URL names (the command line's --store)."""

from __future__ import annotations

from pathlib import Path

import pytest

from merge.store import PostgresStore, SQLiteStore, StoreError, open_store

from .. import postgres_server


def test_sqlite_urls_and_plain_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with open_store(f"sqlite://{tmp_path}/a.db") as store:  # sqlite:///abs/path
        assert isinstance(store, SQLiteStore)
        assert store.path == tmp_path / "a.db"
    monkeypatch.chdir(tmp_path)
    with open_store("sqlite://relative.db") as store:
        assert isinstance(store, SQLiteStore)
        assert store.path == Path("relative.db")
    with open_store(str(tmp_path / "plain.db"), timeout=1.0) as store:
        assert isinstance(store, SQLiteStore)
        assert store.timeout == 1.0
    assert sorted(p.name for p in tmp_path.glob("*.db")) == ["a.db", "plain.db", "relative.db"]


def test_postgresql_urls() -> None:
    server = postgres_server.server()
    name = server.create()
    for url in (server.url(name), server.url(name).replace("postgresql://", "postgres://")):
        with open_store(url) as store:
            assert isinstance(store, PostgresStore)
            assert store.subjects() == []


@pytest.mark.parametrize("url", ["mysql://db/x", "sqlite://", "memory://"])
def test_other_urls_are_refused(url: str) -> None:
    with pytest.raises(StoreError) as caught:
        open_store(url)
    assert caught.value.path == url
