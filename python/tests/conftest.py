"""The module under test is the build tree's (PYTHONPATH=build/python, set by CTest); the CLI is
build/bin/einsumdb (EINSUMDB_BIN). Every test gets a store of its own."""
import os

import pytest


@pytest.fixture
def db(tmp_path, monkeypatch):
    path = str(tmp_path / "facts.sqlite")
    monkeypatch.setenv("EINSUMDB_DB", path)
    return path


@pytest.fixture
def cli():
    return os.environ.get("EINSUMDB_BIN", "einsumdb")
