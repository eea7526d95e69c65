"""Write the golden outputs again, on purpose: ``python tools/make_golden.py``.

Six jobs run through the CLI on the stand-in Gemini world of the tests (a single run, a
batch, a bench, a CUBE concepts run, an SoS bank and its report, an agree run) into
``tests/golden/data``; ``tests/e2e/test_golden.py`` makes them again and compares. A
commit that changes these files says why. ``--diff`` prints what would change instead.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    from tests.e2e.test_cli_run import in_process
    from tests.golden.produce import DATA, Stage, differences, produce, write_meta

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--diff", action="store_true", help="print the differences only")
    args = parser.parse_args(argv)
    # fixed folders, so the paths the files name are the same every time
    root = Path(tempfile.gettempdir()) / "refine-golden"
    with Stage(root / "stage") as stage:
        fresh = root / "data"
        shutil.rmtree(fresh, ignore_errors=True)
        produce(fresh, stage.server, stage.siglip, in_process)
        write_meta(fresh, stage.siglip)
        if DATA.is_dir():
            found = differences(DATA, fresh)
            print("\n".join(found) or "no differences")
        if not args.diff:
            shutil.rmtree(DATA, ignore_errors=True)
            shutil.copytree(fresh, DATA)
            print(f"wrote {DATA}")
        shutil.rmtree(fresh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
