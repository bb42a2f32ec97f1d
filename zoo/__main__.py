"""Command line: ``python -m zoo [demo]``."""

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zoo", description="latentzoo command line")
    commands = parser.add_subparsers(dest="command")
    demo = commands.add_parser("demo", help="aspect model on Reuters: held-out perplexity per β")
    demo.add_argument("--classes", type=int, default=32, help="number of aspects K (default 32)")
    demo.add_argument("--seed", type=int, default=0)
    arguments = parser.parse_args(argv)
    if arguments.command in (None, "demo"):
        from zoo.demo import run_demo

        run_demo(n_classes=getattr(arguments, "classes", 32), seed=getattr(arguments, "seed", 0))
        return 0
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
