"""The HTTP service layer: ``selfrefine serve`` (FastAPI + uvicorn), OpenAI-compatible."""

from .app import ServeSettings, create_app
from .engines import Caps
from .upstream import Upstream

__all__ = ["Caps", "ServeSettings", "Upstream", "create_app"]
