"""The documentation's links and paths lead somewhere: every relative markdown link (and its
#anchor) in README.md, BUILD.md and docs/**/*.md names an existing file and heading, and every
repository path the text mentions (docs/..., and the .py files of xlnet_tf/, tests/, run/,
data/) exists."""

import glob
import os
import re

import pytest

ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))

FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
# A path starts after a space, quote, bracket, '=' or line start: not inside a longer path.
DOCS_PATH = re.compile(r"(?<![\w/.-])docs/[\w./{},*-]*[\w}*]")
CODE_PATH = re.compile(r"(?<![\w/.-])(?:xlnet_tf|tests|run|data)/[\w/]*\w\.py\b")


def markdown_files():
  files = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "BUILD.md")]
  files += glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)
  return sorted(files)


def anchor(heading: str) -> str:
  """GitHub's anchor for a heading: lower case, markup and punctuation dropped, spaces ->
  hyphens."""
  text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading)
  text = re.sub(r"[^\w\- ]", "", text.lower())
  return text.replace(" ", "-")


def anchors_of(path: str) -> set:
  with open(path, encoding="utf-8") as handle:
    text = FENCE.sub("", handle.read())
  seen, result = {}, set()
  for heading in HEADING.findall(text):
    slug = anchor(heading)
    result.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
    seen[slug] = seen.get(slug, 0) + 1
  return result


def _expanded(path: str):
  """docs/x.{md,json} -> both paths."""
  match = re.search(r"\{([^}]*)\}", path)
  if not match:
    return [path]
  return [expanded for option in match.group(1).split(",")
          for expanded in _expanded(path[:match.start()] + option + path[match.end():])]


def _path_exists(relative: str) -> bool:
  """A path the text mentions: a file or folder, a glob that matches, or an output prefix of
  run/benchmark.py (--output=docs/results/speed/peers/NAME writes NAME.md and NAME.json)."""
  path = os.path.join(ROOT, relative.rstrip("/"))
  if any(char in relative for char in "*?["):
    return bool(glob.glob(path))
  return any(os.path.exists(path + suffix) for suffix in ("", ".md", ".json"))


def problems_in(path: str, root: str = ROOT):
  """The broken links and paths of one markdown file, as 'file: what' lines."""
  with open(path, encoding="utf-8") as handle:
    text = handle.read()
  name = os.path.relpath(path, root)
  found = []
  for target in LINK.findall(FENCE.sub("", text)):
    if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
      continue
    file_part, _, fragment = target.partition("#")
    linked = (os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part
              else path)
    if not os.path.exists(linked):
      found.append(f"{name}: link to a missing file: {target}")
    elif fragment and linked.endswith(".md") and fragment not in anchors_of(linked):
      found.append(f"{name}: link to a missing heading: {target}")
  for mention in DOCS_PATH.findall(text) + CODE_PATH.findall(text):
    for relative in _expanded(mention):
      if not _path_exists(relative):
        found.append(f"{name}: mentions a missing path: {relative}")
  return found


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: os.path.relpath(p, ROOT))
def test_links_and_paths_exist(path):
  assert not problems_in(path), "\n".join(problems_in(path))


def test_the_check_finds_what_is_broken(tmp_path):
  page = tmp_path / "page.md"
  page.write_text("# A page\n\n## Real heading\n\n"
                  "[fine](page.md#real-heading) [self](#a-page) [web](https://example.com)\n"
                  "[gone](missing.md) [no heading](page.md#nowhere)\n"
                  "See docs/benchmarks.md and docs/no_such_page.md, "
                  "xlnet_tf/config.py and xlnet_tf/no_such_module.py.\n"
                  "```\n[in code](also_missing.md)\n```\n", encoding="utf-8")
  found = problems_in(str(page), str(tmp_path))
  assert found == ["page.md: link to a missing file: missing.md",
                   "page.md: link to a missing heading: page.md#nowhere",
                   "page.md: mentions a missing path: docs/no_such_page.md",
                   "page.md: mentions a missing path: xlnet_tf/no_such_module.py"]


def test_anchor_follows_github():
  assert anchor("Serving: bfloat16 exports, and XLA in TF Serving") == \
      "serving-bfloat16-exports-and-xla-in-tf-serving"
  assert anchor("The tied projection's gradient") == "the-tied-projections-gradient"
  assert anchor("Using `fill` (XLNet's own case)") == "using-fill-xlnets-own-case"
