"""The HTTP service layer: ``selfrefine serve`` (FastAPI + uvicorn), OpenAI-compatible."""

from .app import ServeSettings, create_app
from .engines import Backends, Caps
from .upstream import Upstream

__all__ = ["Backends", "Caps", "ServeSettings", "Upstream", "create_app"]
