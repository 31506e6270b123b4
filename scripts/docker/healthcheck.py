"""Container health check: exit 0 when GET /healthz on this container answers 200.

Uses only the standard library (the image has no curl). The port comes from
ATTENTION_VIZ_PORT (default 8000), the same variable the app reads.
"""

import os
import sys
import urllib.request

port = os.environ.get("ATTENTION_VIZ_PORT", "8000")
url = f"http://127.0.0.1:{port}/healthz"
try:
    with urllib.request.urlopen(url, timeout=4) as response:
        sys.exit(0 if response.status == 200 else 1)
except OSError as exc:
    sys.stderr.write(f"healthcheck: {url}: {exc}\n")
    sys.exit(1)
