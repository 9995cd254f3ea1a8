"""``python -m mime_fast.cli``: the ``mime-fast`` command."""

from . import main

raise SystemExit(main())
