"""A judge prompt with images in it: text with image placeholders, split into content parts.

A case's images reach the prompt as placeholders in the text (``[DEEPEVAL:IMAGE:<key>]``, the
form deepeval uses). The text a judge is asked about — and hashed into the judgment-cache key —
carries each image under its ``key``: a digest of what the image is (its URL; for a local file
its path and the SHA-256 of its bytes; for inline data the digest of the data), so two different
images never share a key and the same image always has the same one. ``with_images(prompt)``
turns a rendered prompt that holds such placeholders into a ``MultimodalPrompt``: still the same
``str`` (everything that reads prompts as text keeps working), plus ``parts`` — the text pieces
and ``PromptImage`` objects in order — and ``openai_content()``, the chat-completions content
parts (``{"type": "image_url", "image_url": {"url": ...}}``, local files as data URLs).

``PromptImage`` objects are found by key in a weak registry: an image stays known while the case
that holds it (or deepeval's image registry) keeps it alive.
"""

from __future__ import annotations

import re
import weakref
from dataclasses import dataclass
from typing import Any

__all__ = ["IMAGE_PLACEHOLDER", "MultimodalPrompt", "PromptImage", "find_image", "register_image", "with_images"]

#: an image (or PDF) inside a text, as deepeval writes it: ``[DEEPEVAL:IMAGE:<id>]``
IMAGE_PLACEHOLDER = re.compile(r"\[DEEPEVAL:(IMAGE|PDF):(.*?)\]")
_MARK = "[DEEPEVAL:"


@dataclass(frozen=True, eq=False)
class PromptImage:
    """One image as a judge is sent it. ``url``: an http(s) URL, or a ``data:`` URL."""

    key: str
    url: str
    mime_type: str | None = None
    #: what a reader sees in logs and reports (the file name or URL, never the data)
    label: str = ""

    def openai_part(self) -> dict[str, Any]:
        return {"type": "image_url", "image_url": {"url": self.url}}

    @property
    def placeholder(self) -> str:
        return f"[DEEPEVAL:IMAGE:{self.key}]"


_images: weakref.WeakValueDictionary[str, PromptImage] = weakref.WeakValueDictionary()


def register_image(image: PromptImage) -> PromptImage:
    """Make ``image`` findable by its key while something else keeps it alive."""
    _images.setdefault(image.key, image)
    return _images[image.key]


def find_image(key: str) -> PromptImage | None:
    return _images.get(key)


class MultimodalPrompt(str):
    """A prompt (``str``) that holds images: ``parts`` are its text pieces and images in order."""

    parts: tuple[str | PromptImage, ...]

    def __new__(cls, text: str, parts: tuple[str | PromptImage, ...]) -> MultimodalPrompt:
        self = super().__new__(cls, text)
        self.parts = parts
        return self

    @property
    def images(self) -> list[PromptImage]:
        return [p for p in self.parts if isinstance(p, PromptImage)]

    def openai_content(self) -> list[dict[str, Any]]:
        """The chat-completions ``content`` of a user message asking this prompt."""
        out: list[dict[str, Any]] = []
        for part in self.parts:
            if isinstance(part, PromptImage):
                out.append(part.openai_part())
            elif part:
                out.append({"type": "text", "text": part})
        return out


def with_images(prompt: str) -> str:
    """``prompt`` as a ``MultimodalPrompt`` when it holds placeholders of known images, else as is.
    A placeholder of an image not known here stays text."""
    if isinstance(prompt, MultimodalPrompt) or _MARK not in prompt:
        return prompt
    parts: list[str | PromptImage] = []
    last = 0
    for m in IMAGE_PLACEHOLDER.finditer(prompt):
        image = _images.get(m.group(2))
        if image is None:
            continue
        if m.start() > last:
            parts.append(prompt[last : m.start()])
        parts.append(image)
        last = m.end()
    if not parts:
        return prompt
    if last < len(prompt):
        parts.append(prompt[last:])
    return MultimodalPrompt(prompt, tuple(parts))
