"""ReadReport: what a reader read, what it skipped and what it kept but changed (truncated, ...),
and where (file:line), for the summary line every CLI prints once reading is done."""

import dataclasses
from typing import Dict, List


@dataclasses.dataclass
class ReadReport:
  read: int = 0
  skipped: Dict[str, List[str]] = dataclasses.field(default_factory=dict)  # not used
  noted: Dict[str, List[str]] = dataclasses.field(default_factory=dict)    # used, changed

  def skip(self, reason: str, where: str) -> None:
    """An example left out; `read` does not count it."""
    self.skipped.setdefault(reason, []).append(where)

  def note(self, change: str, where: str) -> None:
    """An example kept, but not whole (e.g. "truncated to max_seq_length=128")."""
    self.noted.setdefault(change, []).append(where)

  def summary(self) -> str:
    """'40 examples; 3 truncated to ... (e.g. f:2, f:5, f:9); skipped 2 (no label, e.g. f:7)'."""
    parts = [f"{self.read} examples"]
    parts += [f"{len(w)} {change} (e.g. {', '.join(w[:3])})" for change, w in self.noted.items()]
    parts += [f"skipped {len(w)} ({reason}, e.g. {', '.join(w[:3])})"
              for reason, w in self.skipped.items()]
    return "; ".join(parts)
