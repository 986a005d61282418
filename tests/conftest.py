"""Fixtures shared by the whole suite."""

import pytest


@pytest.fixture
def mujoco_log_in_tmp(tmp_path, monkeypatch):
    """Run the test in a temporary folder: MuJoCo appends its compiler warnings (e.g.
    gymnasium's HalfCheetah ``settotalmass``) to ``MUJOCO_LOG.TXT`` in the working folder."""
    monkeypatch.chdir(tmp_path)
    return tmp_path
