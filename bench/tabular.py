"""CSV input read one way everywhere: UTF-8 text with or without a byte-order mark.

Spreadsheet programs (Excel's "CSV UTF-8", Numbers, LibreOffice with the option
set) start a file with the UTF-8 byte-order mark ``EF BB BF``. Decoded as plain
``utf-8`` the mark (U+FEFF) sticks to the first column's name, and a
reader that looks up ``scene`` then reports a missing column. Every user-facing
CSV reader of the bench (``bench reliability`` scores and labels, ``bench plan
trials --pilot``, ``bench reliability-inputs``, ``bench tables yubi``, a study's
``real_results``) opens its file through this module, so a file with the mark
reads exactly like the same file without it.

Standard library only at import time (``protocols`` imports it); pandas is
imported by :func:`read_csv_frame` alone.
"""

from __future__ import annotations

import os
from typing import IO, Any

#: The encoding of every CSV the bench reads: UTF-8, a leading byte-order mark dropped.
CSV_ENCODING = "utf-8-sig"


def open_csv_text(path: str | os.PathLike) -> IO[str]:
    """Open a CSV file for :mod:`csv` readers (text, BOM dropped, ``newline=""``).

    Args:
        path: The CSV file.

    Returns:
        An open text handle (use it as a context manager). Bytes that are not
        UTF-8 raise ``UnicodeDecodeError`` on reading, as with plain ``utf-8``.
    """
    return open(path, newline="", encoding=CSV_ENCODING)


def read_csv_frame(path: str | os.PathLike, **kwargs: Any) -> Any:
    """``pandas.read_csv(path, encoding="utf-8-sig", **kwargs)``: a DataFrame, BOM dropped."""
    import pandas as pd

    return pd.read_csv(path, encoding=CSV_ENCODING, **kwargs)
