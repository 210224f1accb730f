"""``python -m kaos_core.settings``: write or check generated settings tables (``docs.main``)."""

from __future__ import annotations

from kaos_core.settings.docs import main

raise SystemExit(main())
