"""User mistakes: each carries one line for the user and an exit code."""


class DdpgenError(Exception):
    """A failure the user can fix; the CLI prints the message, no traceback."""

    exit_code = 1

    def __init__(self, message):
        super().__init__(message)
        self.message = message


class UsageError(DdpgenError):
    """Bad input on the command line: a name, a flag, a destination."""

    exit_code = 2


class TemplateError(DdpgenError):
    """The template the user named cannot be read or rendered."""

    exit_code = 2
