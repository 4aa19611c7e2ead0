"""``python -m picourse``: an interactive session with your own tools (see picourse.session)."""

from picourse.session import main

raise SystemExit(main())
