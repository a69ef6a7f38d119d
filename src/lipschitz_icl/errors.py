"""Errors the toolkit raises on purpose; the CLI turns each into one line and an exit code."""

from __future__ import annotations


class UserInputError(ValueError):
    """Bad input from the user (config, override, file, path). The CLI exits with code 2."""


class ConfigError(UserInputError):
    """A config value is wrong: names the field and what is allowed."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


class TaskEvaluationError(RuntimeError):
    """A task class produced non-finite values (e.g. a user-registered class returning NaN)."""
