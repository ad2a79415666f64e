"""Records that stay readable across versions: a field added after runs were stored is left
out of a record while it is unset, so the record of a run that does not use it is the one it
was before the field existed (stored runs, eval folders that resume, golden files agree)."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer


class Later(BaseModel):
    """A record whose fields named in ``LATER`` are dumped only when set (not None, not empty)."""

    LATER: ClassVar[tuple[str, ...]] = ()

    @model_serializer(mode="wrap")
    def _later_fields_only_when_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name in self.LATER:
            if self._unset(name):
                data.pop(name, None)
        return data

    def _unset(self, name: str) -> bool:
        """Whether late field ``name`` is left out of the dump (a record may say when)."""
        return getattr(self, name, None) in (None, [], {}, ())
