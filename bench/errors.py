"""One exception type for every user-facing failure.

The CLI turns a :class:`BenchError` into a one-line message and exit code 2,
never a traceback. Library code raises it (or a ``ValueError``) with a message
that names the problem *and* the fix.
"""


class BenchError(ValueError):
    """A user-facing error: bad input, missing file, refused overwrite."""


def count_noun(count: int, singular: str, plural: str | None = None) -> str:
    """``"1 Gaussian"``, ``"2 Gaussians"``: a count with its noun in the right number."""
    return f"{count:,} {singular if count == 1 else (plural or singular + 's')}"
