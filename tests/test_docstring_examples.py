"""The runnable examples in the public classes' docstrings (keras-hub's habit) run and print
what they show, on the tiny config. A class whose example is removed fails too (nothing
attempted), so the examples stay."""

import doctest
import sys

import keras
import pytest

from xlnet_tf import (XLNetClassifier, XLNetModel, XLNetMultipleChoice, XLNetPreprocessor,
                      XLNetPretrainer, XLNetQuestionAnswering, XLNetTokenClassifier,
                      XLNetTokenizer)
from xlnet_tf.heads import SequenceSummary

DOCUMENTED = {documented.__name__: documented for documented in (
    XLNetModel, XLNetPretrainer, XLNetClassifier, XLNetMultipleChoice, XLNetQuestionAnswering,
    XLNetTokenClassifier, SequenceSummary, XLNetTokenizer, XLNetPreprocessor)}


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_docstring_example_runs(name):
  documented = DOCUMENTED[name]
  module = sys.modules[documented.__module__]
  # The class docstring only (recurse=False), in a copy of its module's namespace.
  examples = doctest.DocTestFinder(recurse=False).find(documented, name, module=module)
  runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
  report = []
  keras.utils.set_random_seed(0)
  for example in examples:
    runner.run(example, out=report.append)
  results = runner.summarize(verbose=False)
  assert results.attempted > 0, f"{name}'s docstring has no >>> example"
  assert results.failed == 0, "".join(report)
