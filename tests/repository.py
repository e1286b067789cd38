"""Paths in the repository, for tests in any folder under tests/."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
