"""The ``mime-fast`` command.

    mime-fast demo [--out DIR]            the seven MIME subsets of a sample clip, offline
    mime-fast info                        version, CUDA status, CPU threads
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ap = argparse.ArgumentParser(prog="mime-fast", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["demo", "info"])
    args, rest = ap.parse_known_args(argv)
    if args.command == "demo":
        from .demo import main as demo_main

        return demo_main(rest)
    import mime_fast

    print(f"mime_fast {mime_fast.__version__}")
    print(f"CUDA: {mime_fast.cuda_status()}")
    print(f"CPU threads: {mime_fast.num_threads()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
