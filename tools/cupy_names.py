"""Read the names CuPy really offers into tests/cupy_names.json, for the device double.

The device double (tests/device_double.py) lets code call only what CuPy has:
``xp.exp`` works, ``xp.add.at`` works only if CuPy's ufuncs have ``at``, a
method on an array works only if ``cupy.ndarray`` has it. The names come from
the installed CuPy itself, not from memory. CuPy is about 300 MB and needs no GPU
to import, so the names are read once into a small checked-in list; CI does not
install CuPy, and tests/test_device_double.py checks that the list still matches
whenever CuPy is installed.

    pip install cupy-cuda12x
    python tools/cupy_names.py           # rewrite tests/cupy_names.json
    python tools/cupy_names.py --check   # exit 1 when the list is out of date
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

LIST = Path(__file__).resolve().parents[1] / "tests" / "cupy_names.json"


def public(obj) -> list[str]:
    return sorted(name for name in dir(obj) if not name.startswith("_"))


def read_names() -> dict:
    """Every public name the double consults, read from the installed CuPy."""
    import cupy  # noqa: PLC0415 - the point of the tool
    import cupyx  # noqa: PLC0415

    return {
        "cupy_version": cupy.__version__,
        "cupy": public(cupy),
        "ufuncs": sorted(name for name in public(cupy) if isinstance(getattr(cupy, name), cupy.ufunc)),
        "ufunc_methods": public(cupy.ufunc),
        "ndarray": public(cupy.ndarray),
        "random": public(cupy.random),
        "random_generator": public(cupy.random.Generator),
        "random_state": public(cupy.random.RandomState),
        "linalg": public(cupy.linalg),
        "cupyx": public(cupyx),
    }


def render(names: dict) -> str:
    return json.dumps(names, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when tests/cupy_names.json is out of date")
    args = parser.parse_args(argv)
    try:
        text = render(read_names())
    except ImportError:
        print("cupy_names: CuPy is not installed (pip install cupy-cuda12x; no GPU needed)", file=sys.stderr)
        return 2
    if args.check:
        if LIST.read_text() != text:
            print(f"cupy_names: {LIST} does not match the installed CuPy; run python tools/cupy_names.py",
                  file=sys.stderr)
            return 1
        return 0
    LIST.write_text(text)
    print(f"wrote {LIST}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
