"""``python -m accessibility`` runs the command-line interface."""

from accessibility.cli import main

raise SystemExit(main())
