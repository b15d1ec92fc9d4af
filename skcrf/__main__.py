"""``python -m skcrf``: the ``skcrf`` command (see ``skcrf -h``)."""

from ._cli import console_main

if __name__ == "__main__":
    console_main()
