"""BM25 retrieval over the knowledge base in rag_docs/ (one Markdown section per file).

Agents cite sections by id and put retrieved sections in prompts. Pure Python, no torch.

>>> kb = KnowledgeBase.load()
>>> kb.search("warp shuffle reduction __shfl_down_sync", k=1)[0].id
'warp-shuffle-reductions'

A section file ``<id>.md`` starts with ``# Title``, then ``id: <id>``, then ``tags: a, b``,
then the body.
"""

from __future__ import annotations

import math
import os
import re
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..settings import Settings, env_name

__all__ = ["Hit", "KnowledgeBase", "Section", "resolve_rag_dir", "tokenize"]

RAG_DIR_ENV = env_name("rag_dir")     # Settings.rag_dir
K1 = 1.5
B = 0.75
TITLE_WEIGHT = 3     # title and id tokens count this many times in a section's document
TAG_WEIGHT = 2

_PACKAGE = Path(__file__).resolve().parent.parent           # stitchcuda_lab/
_CANDIDATE_DIRS = (_PACKAGE.parent / "rag_docs",            # a checkout: rag_docs/ at the root
                   _PACKAGE / "rag_docs",                   # a copy inside the package
                   # an installed wheel: pyproject's data-files put the sections here
                   Path(sys.prefix) / "share" / "stitchcuda_lab" / "rag_docs")

_WORD = re.compile(r"[A-Za-z0-9_]+")
_CAMEL = re.compile(r"[A-Z0-9]+(?=[A-Z][a-z])|[A-Z]?[a-z0-9]+|[A-Z0-9]+")
_STOP = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "how", "in", "into", "is", "it", "its", "of", "on", "or", "so", "that", "the", "their", "then", "there", "these", "this", "to", "was", "were", "what", "when", "where", "which", "while", "with"])


def tokenize(text: str) -> list[str]:
    """Lower-case tokens that keep code identifiers whole and add their parts.

    ``__shfl_down_sync`` gives ``__shfl_down_sync, shfl, down, sync``; ``cudaGraphLaunch``
    gives ``cudagraphlaunch, cuda, graph, launch``; ``float4`` and ``sm_90`` stay whole
    (``sm_90`` also adds ``sm`` and ``90``). Common English stop words are dropped.
    """
    tokens: list[str] = []
    for word in _WORD.findall(text):
        whole = word.lower()
        if whole not in _STOP and whole.strip("_"):
            tokens.append(whole)
        parts = [p.lower() for chunk in word.split("_") for p in _CAMEL.findall(chunk)]
        if len(parts) > 1 or (parts and parts[0] != whole):
            tokens.extend(p for p in parts if p not in _STOP)
    return tokens


@dataclass(frozen=True)
class Section:
    """One knowledge-base entry: ``rag_docs/<id>.md``."""

    id: str
    title: str
    tags: tuple[str, ...]
    body: str

    @property
    def words(self) -> int:
        return len(self.body.split())

    def as_markdown(self) -> str:
        """The section as a prompt block, headed by its title and id."""
        return f"## {self.title} [{self.id}]\n\n{self.body.strip()}\n"


@dataclass(frozen=True)
class Hit:
    """A search result: the section's id and title, its BM25 score, a matching snippet and the
    section's full body (``text``, for prompts)."""

    id: str
    title: str
    score: float
    snippet: str
    text: str = ""


def resolve_rag_dir(path: str | os.PathLike | None = None,
                    env: Mapping[str, str] | None = None) -> Path:
    """The folder to load: ``path``, else ``Settings.rag_dir`` (from ``env``, os.environ by
    default), else the repository's rag_docs/, else the copy shipped inside the package."""
    if path is None:
        path = Settings.from_env(env).rag_dir
    if path is not None:
        folder = Path(path).expanduser()
        if not folder.is_dir():
            raise ConfigError(f"knowledge base folder {folder} does not exist",
                              hint=f"point {RAG_DIR_ENV} (or path=) at a folder of <id>.md files")
        return folder
    for folder in _CANDIDATE_DIRS:
        if folder.is_dir():
            return folder
    raise ConfigError("no rag_docs/ folder found beside the package",
                      hint=f"set {RAG_DIR_ENV} to a folder of <id>.md sections")


def parse_section(text: str, source: str = "<text>") -> Section:
    """Parse ``# Title`` / ``id: ...`` / ``tags: ...`` / body. Raises ConfigError if malformed."""
    lines = text.splitlines()
    head = [i for i, line in enumerate(lines) if line.strip()][:3]
    if len(head) < 3 or not lines[head[0]].startswith("# "):
        raise ConfigError(f"{source}: a section starts with '# Title', 'id: ...', 'tags: ...'",
                          hint="see rag_docs/README.md for the format")
    title = lines[head[0]][2:].strip()
    fields: dict[str, str] = {}
    for i in head[1:]:
        key, sep, value = lines[i].partition(":")
        if not sep or key.strip().lower() not in ("id", "tags"):
            raise ConfigError(f"{source}:{i + 1}: expected 'id: ...' or 'tags: ...', "
                              f"got {lines[i].strip()!r}", hint="see rag_docs/README.md")
        fields[key.strip().lower()] = value.strip()
    if "id" not in fields or "tags" not in fields:
        raise ConfigError(f"{source}: both 'id:' and 'tags:' lines are required",
                          hint="see rag_docs/README.md")
    tags = tuple(t.strip() for t in fields["tags"].split(",") if t.strip())
    body = "\n".join(lines[head[2] + 1:]).strip() + "\n"
    return Section(id=fields["id"], title=title, tags=tags, body=body)


class KnowledgeBase:
    """Sections indexed with Okapi BM25 (k1 = 1.5, b = 0.75)."""

    def __init__(self, sections: list[Section]):
        ids = [s.id for s in sections]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ConfigError(f"duplicate section ids: {', '.join(duplicates)}",
                              hint="each rag_docs/<id>.md needs a unique id")
        self.sections = sorted(sections, key=lambda s: s.id)
        self._by_id = {s.id: s for s in self.sections}
        self._tf = [Counter(self._document_tokens(s)) for s in self.sections]
        self._len = [sum(tf.values()) for tf in self._tf]
        self._avg_len = (sum(self._len) / len(self._len)) if self._len else 0.0
        df = Counter(term for tf in self._tf for term in tf)
        n = len(self.sections)
        self._idf = {t: math.log((n - d + 0.5) / (d + 0.5) + 1.0) for t, d in df.items()}

    @classmethod
    def load(cls, path: str | os.PathLike | None = None, *,
             env: Mapping[str, str] | None = None) -> KnowledgeBase:
        """Read every ``*.md`` section under ``path`` (default: see ``resolve_rag_dir``).

        >>> KnowledgeBase.load().section("cuda-graphs").title
        'CUDA graphs: capture once, replay cheaply'
        """
        folder = resolve_rag_dir(path, env)
        sections = []
        for file in sorted(folder.glob("*.md")):
            if file.name.lower() == "readme.md":
                continue
            section = parse_section(file.read_text(encoding="utf-8"), str(file))
            if section.id != file.stem:
                raise ConfigError(f"{file}: id {section.id!r} does not match the file name",
                                  hint=f"rename the file to {section.id}.md or fix the id line")
            sections.append(section)
        return cls(sections)

    def __len__(self) -> int:
        return len(self.sections)

    def __contains__(self, section_id: object) -> bool:
        return section_id in self._by_id

    def ids(self) -> list[str]:
        return [s.id for s in self.sections]

    def section(self, section_id: str) -> Section:
        try:
            return self._by_id[section_id]
        except KeyError:
            raise ConfigError(f"no knowledge-base section {section_id!r}",
                              hint=f"known ids: {', '.join(self._by_id)}") from None

    def scores(self, query: str) -> list[float]:
        """BM25 score of every section (in ``self.sections`` order) for ``query``."""
        terms = [t for t in set(tokenize(query)) if t in self._idf]
        out = []
        for tf, length in zip(self._tf, self._len):
            norm = K1 * (1.0 - B + B * length / self._avg_len) if self._avg_len else K1
            out.append(sum(self._idf[t] * tf[t] * (K1 + 1.0) / (tf[t] + norm)
                           for t in terms if t in tf))
        return out

    def search(self, query: str, k: int = 4) -> list[Hit]:
        """The ``k`` best sections for ``query``, best first; sections scoring 0 are left out.

        >>> [h.id for h in KnowledgeBase.load().search("float4 aligned loads", k=1)]
        ['vectorized-access']
        """
        ranked = sorted(zip(self.scores(query), self.sections), key=lambda p: (-p[0], p[1].id))
        terms = set(tokenize(query))
        return [Hit(s.id, s.title, round(score, 4), _snippet(s.body, terms), s.body)
                for score, s in ranked[:max(k, 0)] if score > 0]

    @staticmethod
    def _document_tokens(s: Section) -> list[str]:
        heading = tokenize(s.title + " " + s.id.replace("-", " "))
        return heading * TITLE_WEIGHT + tokenize(" ".join(s.tags)) * TAG_WEIGHT + tokenize(s.body)


def _snippet(body: str, terms: set[str], width: int = 240) -> str:
    """The paragraph (or its best window) that holds the most query terms."""
    prose = "\n".join(line for line in body.splitlines() if not line.startswith("```"))
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", prose) if p.strip()] or [body.strip()]
    best = max(paragraphs, key=lambda p: (len(terms & set(tokenize(p))), -paragraphs.index(p)))
    best = " ".join(best.split())
    if len(best) <= width:
        return best
    words = best.split(" ")
    spans = []
    for start in range(len(words)):
        window = " ".join(words[start:start + 40])[:width]
        spans.append((len(terms & set(tokenize(window))), -start, window))
    _, neg_start, window = max(spans)
    prefix = "... " if neg_start else ""
    return prefix + window.rsplit(" ", 1)[0] + " ..."
