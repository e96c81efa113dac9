"""A mistyped command or option gets the nearest right one, so a typo costs one glance."""

from __future__ import annotations

import pytest

from anarchon.cli import main


def test_a_mistyped_command_suggests_the_nearest_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["jbos"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'jbos'; did you mean 'jobs'?" in err


def test_the_command_word_is_found_after_the_global_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-v", "histroy"]) == 2
    assert "did you mean 'history'?" in capsys.readouterr().err


def test_a_word_near_nothing_gets_no_guess(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["zzzzzz"]) == 2
    err = capsys.readouterr().err
    assert "unknown command 'zzzzzz'" in err and "did you mean" not in err


def test_a_mistyped_option_suggests_the_commands_own(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["jobs", "app:scheduler", "--backned", "memory://"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "anarchon jobs: error:" in err and "'--backned'; did you mean '--backend'?" in err


def test_an_option_of_another_command_is_not_suggested(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["backends", "--limt", "3"])
    err = capsys.readouterr().err
    assert "'--limt'" in err and "--limit" not in err  # --limit belongs to history, not backends
