"""The module under test is the build tree's (PYTHONPATH=build/python, set by CTest), or, with
EINSUMDB_EXPECT_INSTALLED=1 (scripts/test.sh), the package pip installed; the CLI is
build/bin/einsumdb (EINSUMDB_BIN). Every test gets a store of its own."""
import os
import pathlib

import pytest


def pytest_report_header(config):
    import einsumdb
    return f"einsumdb under test: {pathlib.Path(einsumdb.__file__).parent}"


def pytest_sessionstart(session):
    if os.environ.get("EINSUMDB_EXPECT_INSTALLED") == "1":
        import einsumdb
        where = pathlib.Path(einsumdb.__file__).resolve()
        if "-packages" not in str(where):
            raise pytest.UsageError(f"expected the installed package, imported {where}")


@pytest.fixture
def db(tmp_path, monkeypatch):
    path = str(tmp_path / "facts.sqlite")
    monkeypatch.setenv("EINSUMDB_DB", path)
    return path


@pytest.fixture
def cli():
    return os.environ.get("EINSUMDB_BIN", "einsumdb")
