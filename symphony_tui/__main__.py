"""``python -m symphony_tui``: the same command line as ``symphony-tui`` (README)."""

if __name__ == "__main__":  # importing it (a tool walking the package) runs nothing
    import sys

    from symphony_tui.cli import main

    sys.exit(main())
