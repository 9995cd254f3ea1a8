"""``python -m mime_fast.samples OUT.mp4 ...``: :func:`mime_fast.samples.clip.main`."""

from .clip import main

raise SystemExit(main())
