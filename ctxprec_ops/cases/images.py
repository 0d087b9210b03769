"""Images in test cases: ``MLLMImage`` (deepeval's fields and behaviour) and the text a judge
is asked about when a case holds images.

As in deepeval, an image goes into a text field through its placeholder — ``f"What is in
{image}?"`` writes ``[DEEPEVAL:IMAGE:<id>]`` — and is found again in a registry by that id; an
``MLLMImage`` may also stand on its own as a ``retrieval_context`` node (or in place of a text
field). deepeval's own ``MLLMImage`` objects are found in deepeval's registry too (when deepeval
is imported; ctxprec-ops never imports it).

``judged_text`` rewrites the placeholders of a text into the image's stable ``key``
(``scoring.prompt_parts``): the judgment-cache key then depends on what the image is — its URL,
or for a local file its path and content hash — and not on the random id of one ``MLLMImage``.
"""

from __future__ import annotations

import base64
import hashlib
import mimetypes
import os
import sys
import uuid
import weakref
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

from ..errors import InvalidTestCaseError
from ..scoring.prompt_parts import IMAGE_PLACEHOLDER, PromptImage, find_image, register_image

__all__ = ["MLLMImage", "as_image", "image_for", "judged_text", "display_text", "has_placeholder"]

#: every ``MLLMImage`` built in this process, by id (deepeval keeps one too: placeholders in
#: texts are resolved through it)
_REGISTRY: dict[str, MLLMImage] = {}
#: images by ``key`` (what the judge's prompt names them by), while something keeps them alive
_BY_KEY: weakref.WeakValueDictionary[str, MLLMImage] = weakref.WeakValueDictionary()
_registering: ContextVar[bool] = ContextVar("ctxprec_register_images", default=True)
_DEEPEVAL_MODULE = "deepeval.test_case.llm_test_case"
_MARK = "[DEEPEVAL:"


def _path_of(url: str) -> str:
    """A local path for ``url`` (a path, or a ``file:`` URL), else ``url`` itself."""
    if os.path.exists(url):
        return url
    parsed = urlparse(url)
    if parsed.scheme == "file":
        return unquote(f"//{parsed.netloc}{parsed.path}" if parsed.netloc else parsed.path)
    return url


@dataclass(eq=False)
class MLLMImage:
    """An image: a remote ``url`` (http/https), a local file (``url`` is a path or ``file:``
    URL: read when the image is built, as deepeval does), or inline ``dataBase64`` + ``mimeType``.

    ``str(image)`` (and ``f"{image}"``) is its placeholder, ``[DEEPEVAL:IMAGE:<id>]``. Two images
    are equal when they are the same picture (URL, or data and type), whatever their ids."""

    dataBase64: str | None = None
    mimeType: str | None = None
    url: str | None = None
    local: bool | None = None
    filename: str | None = None
    _id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def __post_init__(self) -> None:
        if not self.url and not self.dataBase64:
            raise ValueError(
                "You must provide either a 'url' or both 'dataBase64' and 'mimeType' to create an MLLMImage."
            )
        if self.dataBase64 is not None:
            if self.mimeType is None:
                raise ValueError("mimeType must be provided when initializing from Base64 data.")
        else:
            assert self.url is not None
            is_local = self.is_local_path(self.url)
            if self.local is not None and self.local != is_local:
                state = "is" if is_local else "is not"
                raise ValueError(f"Local path mismatch: local={self.local} but {self.url!r} {state} a local file")
            self.local = is_local
            if is_local:
                path = self.process_url(self.url)
                self.filename = os.path.basename(path)
                self.mimeType = mimetypes.guess_type(path)[0] or "image/jpeg"
                self._load_base64(path)
            else:
                if not self.url.startswith(("http://", "https://")):
                    raise ValueError(
                        f"Invalid remote URL format: {self.url}. URL must start with http:// or https:// "
                        "(and no local file of that name exists)"
                    )
                self.filename = os.path.basename(urlparse(self.url).path)
                self.mimeType = mimetypes.guess_type(self.filename)[0]
        self._prompt_image: PromptImage | None = None
        if _registering.get():
            _REGISTRY[self._id] = self

    # -- deepeval's API ----------------------------------------------------------------------
    def _load_base64(self, path: str) -> None:
        with open(path, "rb") as f:
            self.dataBase64 = base64.b64encode(f.read()).decode("ascii")

    def ensure_images_loaded(self) -> MLLMImage:
        if self.local and self.dataBase64 is None and self.url:
            self._load_base64(self.process_url(self.url))
        return self

    def _placeholder(self) -> str:
        kind = "PDF" if self.mimeType == "application/pdf" else "IMAGE"
        return f"[DEEPEVAL:{kind}:{self._id}]"

    def __str__(self) -> str:
        return self._placeholder()

    def __repr__(self) -> str:
        return self._placeholder()

    def __format__(self, format_spec: str) -> str:
        return self._placeholder()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MLLMImage):
            return NotImplemented
        return (self.url, self.dataBase64, self.mimeType) == (other.url, other.dataBase64, other.mimeType)

    __hash__ = None  # type: ignore[assignment]  # mutable, as deepeval's

    @staticmethod
    def process_url(url: str) -> str:
        return _path_of(url)

    @staticmethod
    def is_local_path(url: str) -> bool:
        return os.path.exists(_path_of(url))

    @staticmethod
    def parse_multimodal_string(s: str) -> list[str | MLLMImage]:
        """``s`` split into its text pieces and images (placeholders of unknown images stay text)."""
        out: list[str | MLLMImage] = []
        last = 0
        for m in IMAGE_PLACEHOLDER.finditer(s):
            image = image_for(m.group(2))
            if image is None:
                continue
            if m.start() > last:
                out.append(s[last : m.start()])
            out.append(image)
            last = m.end()
        if last < len(s):
            out.append(s[last:])
        return out

    def as_data_uri(self) -> str | None:
        if not self.dataBase64 or not self.mimeType:
            return None
        return f"data:{self.mimeType};base64,{self.dataBase64}"

    # -- ours --------------------------------------------------------------------------------
    @property
    def key(self) -> str:
        """What this picture is, as a digest: the URL of a remote image; the path and the SHA-256
        of the bytes of a local file; the type and data of an inline image."""
        return self.prompt_image().key

    def prompt_image(self) -> PromptImage:
        """This image as a judge is sent it (a remote URL as is, else a data URL); registered by key."""
        cached = self._prompt_image
        if cached is not None:
            return cached
        if self.url and not self.local:
            key = _digest(b"url", self.url.encode("utf-8"))
            url = self.url
        else:
            self.ensure_images_loaded()
            data = (self.dataBase64 or "").encode("ascii")
            where = os.path.abspath(self.process_url(self.url)).encode("utf-8", "surrogatepass") if self.url else b""
            key = _digest(b"data", (self.mimeType or "").encode(), where, hashlib.sha256(data).digest())
            url = self.as_data_uri() or ""
        label = self.filename or (self.url or "inline image")
        image = register_image(PromptImage(key=key, url=url, mime_type=self.mimeType, label=label))
        self._prompt_image = image
        _BY_KEY.setdefault(key, self)
        _share_with_deepeval(key, self)
        return image

    def to_dict(self) -> dict[str, Any]:
        """The fields a case's ``model_dump`` writes (local files and remote images by ``url``)."""
        if self.url:
            return {"url": self.url, "mimeType": self.mimeType}
        return {"dataBase64": self.dataBase64, "mimeType": self.mimeType}

    @classmethod
    def detached(cls, **fields: Any) -> MLLMImage:
        """An image not put in the process-wide registry (warehouse rows: it lives with its case)."""
        token = _registering.set(False)
        try:
            return cls(**fields)
        finally:
            _registering.reset(token)


def _digest(*pieces: bytes) -> str:
    h = hashlib.sha256()
    for p in pieces:
        h.update(len(p).to_bytes(8, "big") + p)
    return h.hexdigest()[:32]


def as_image(obj: Any) -> MLLMImage | None:
    """``obj`` as our ``MLLMImage``: itself, or a copy of deepeval's (same id, registered)."""
    if isinstance(obj, MLLMImage):
        return obj
    if type(obj).__name__ != "MLLMImage" or not hasattr(obj, "_placeholder"):
        return None
    ident = getattr(obj, "_id", None) or uuid.uuid4().hex
    mine = _REGISTRY.get(ident)
    if mine is None:
        data, url = getattr(obj, "dataBase64", None), getattr(obj, "url", None)
        fields = {"dataBase64": data, "mimeType": getattr(obj, "mimeType", None)} if data and not url else {"url": url}
        mine = MLLMImage(**fields, _id=ident)
    return mine


def _share_with_deepeval(key: str, image: MLLMImage) -> None:
    """When deepeval is imported, put the image in its registry under ``key`` too: a custom
    multimodal model written for deepeval finds the images of our prompts with deepeval's own
    helpers (``convert_to_multi_modal_array``). Best effort; deepeval is never imported here."""
    module = sys.modules.get(_DEEPEVAL_MODULE)
    registry = getattr(module, "_MLLM_IMAGE_REGISTRY", None)
    theirs = getattr(module, "MLLMImage", None)
    if not isinstance(registry, dict) or theirs is None or key in registry:
        return
    try:
        if image.url and not image.local:
            theirs(url=image.url, _id=key)
        else:
            theirs(dataBase64=image.dataBase64, mimeType=image.mimeType, _id=key)
    except Exception:  # noqa: BLE001 - a courtesy to deepeval code, never a failure of ours
        pass


def image_for(ident: str) -> MLLMImage | None:
    """The image a placeholder names (by id, or by key): ours, else deepeval's (copied), else None."""
    mine = _REGISTRY.get(ident) or _BY_KEY.get(ident)
    if mine is not None:
        return mine
    registry = getattr(sys.modules.get(_DEEPEVAL_MODULE), "_MLLM_IMAGE_REGISTRY", None)
    theirs = registry.get(ident) if isinstance(registry, dict) else None
    return as_image(theirs) if theirs is not None else None


def has_placeholder(text: Any) -> bool:
    return isinstance(text, str) and _MARK in text and IMAGE_PLACEHOLDER.search(text) is not None


def judged_text(text: str, where: str) -> str:
    """``text`` with each image placeholder naming the image by its key (see module doc).
    ``InvalidTestCaseError`` (naming ``where``) for an image not known here, or a PDF."""
    if _MARK not in text:
        return text

    def key_of(m: Any) -> str:
        kind, ident = m.group(1), m.group(2)
        if kind == "PDF":
            raise InvalidTestCaseError(f"{where} holds a PDF document ({m.group(0)}): only images can be judged")
        image = image_for(ident)
        if image is None:
            if find_image(ident) is not None:  # already a key
                return str(m.group(0))
            raise InvalidTestCaseError(
                f"{where} names an image that is not known in this process ({m.group(0)}): build the "
                "MLLMImage in the process that scores the case"
            )
        if image.mimeType == "application/pdf":
            raise InvalidTestCaseError(f"{where} holds a PDF document ({m.group(0)}): only images can be judged")
        return image.prompt_image().placeholder

    return IMAGE_PLACEHOLDER.sub(key_of, text)


def display_text(text: str) -> str:
    """``text`` for people (reports, logs): each image as ``[image: <file name or URL>]``."""
    if _MARK not in text:
        return text

    def label(m: Any) -> str:
        image = image_for(m.group(2))
        if image is not None:
            return f"[image: {image.filename or image.url or 'inline'}]"
        known = find_image(m.group(2))
        return f"[image: {known.label}]" if known is not None else str(m.group(0))

    return IMAGE_PLACEHOLDER.sub(label, text)
