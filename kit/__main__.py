"""`python -m kit ...`: the same command line as the `kit` script."""

from kit.cli.main import main

raise SystemExit(main())
