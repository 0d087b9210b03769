"""``bqemulator start`` with the two fixes it needs on a machine without internet access, run by
the emulator's own environment (``.venv-bqemulator``; tests/fixtures/bqemulator.py starts it):

- DuckDB's ``spatial`` extension is not loaded (the emulator downloads it at start, and refuses
  to start without it; GEOGRAPHY is not used here);
- a ``BYTES`` query parameter is decoded from base64, as BigQuery's REST contract sends it (the
  emulator keeps the base64 text: a binary key written through a parameter would read back as
  its base64 text).

    python tests/helpers/bqemulator_start.py start --rest-port N --grpc-port M ...
"""

from __future__ import annotations

import base64
import sys


def main() -> int:
    from bqemulator.cli import main as bqemulator
    from bqemulator.sql import parameters
    from bqemulator.storage.engine import DuckDBEngine

    DuckDBEngine._load_spatial = lambda self: None  # type: ignore[method-assign]
    parameters._SCALAR_CONVERTERS["BYTES"] = base64.b64decode
    return bqemulator()


if __name__ == "__main__":
    sys.exit(main())
