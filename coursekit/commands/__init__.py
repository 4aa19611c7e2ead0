"""One module per practice.py subcommand; each offers ``add_parser`` and ``run``."""
