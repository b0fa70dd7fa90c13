"""``python -m odcore``: the engine from a shell."""

from odcore.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
