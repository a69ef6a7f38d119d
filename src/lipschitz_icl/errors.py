"""Errors the toolkit raises on purpose; the CLI turns each into one line and an exit code."""

from __future__ import annotations


class UserInputError(ValueError):
    """Bad input from the user (config, override, file, path). The CLI exits with code 2.

    The message speaks the Python API's words (``force=True``, ``out=...``); ``cli``, when the command
    line names the same thing otherwise (``--force``, ``--out ...``), is the message the CLI prints."""

    def __init__(self, message: str, cli: str | None = None) -> None:
        super().__init__(message)
        self.cli = cli


def cli_message(error: UserInputError) -> str:
    """What the command line says of ``error``: its CLI wording when it has one, else its message."""
    return getattr(error, "cli", None) or str(error)


class ConfigError(UserInputError):
    """A config value is wrong: names the field and what is allowed."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


class TaskEvaluationError(RuntimeError):
    """A task class produced non-finite values (e.g. a user-registered class returning NaN)."""
