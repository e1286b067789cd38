"""The project's PNG figures (matplotlib, headless): one way to open and to save them, line
styles that tell many series apart, tick labels that do not collide, and the check a tool that
draws makes before it starts its work.

matplotlib is an extra (setup.cfg: `plots`); only the functions that draw import it.
"""

import importlib
from typing import Dict, List, Sequence

from xlnet_tf.utils.errors import UserInputError

PLOTS_EXTRA = "plots"
# The ten colours of matplotlib's default cycle ("tab10"); more series also change the marker
# and the line style, so no two series look alike.
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
            "#7f7f7f", "#bcbd22", "#17becf")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")
_LINE_STYLES = ("-", "--", ":", "-.")


def check_matplotlib(what: str) -> None:
  """Raises UserInputError (one line naming the extra to install) when matplotlib cannot be
  imported: a tool that draws `what` calls this before its work, not after."""
  try:
    importlib.import_module("matplotlib")
  except ImportError as error:  # --verbose shows it
    raise UserInputError(f"{what} needs matplotlib, which cannot be imported; install the "
                         f"'{PLOTS_EXTRA}' extra: pip install -e \".[{PLOTS_EXTRA}]\"") from error


def figure(columns: int = 1, width: float = 7.0, height: float = 4.5):
  """(figure, [axes]) on the Agg backend (no display needed)."""
  import matplotlib
  matplotlib.use("Agg")
  from matplotlib import pyplot
  opened, axes = pyplot.subplots(1, columns, figsize=(width * columns, height), squeeze=False)
  return opened, list(axes[0])


def distinct_styles(count: int) -> List[Dict[str, str]]:
  """`count` line styles (plot keyword arguments: color, marker, linestyle), no two alike: the
  ten colours with a marker each, then again with the next markers and line style."""
  styles = []
  for index in range(count):
    round_, colour = divmod(index, len(_COLOURS))
    styles.append({"color": _COLOURS[colour],
                   "marker": _MARKERS[(colour + round_) % len(_MARKERS)],
                   "linestyle": _LINE_STYLES[round_ % len(_LINE_STYLES)]})
  return styles


def combined_styles(keys: Sequence[Sequence]) -> List[Dict[str, str]]:
  """A style per series from up to three of its properties, one style channel each: the first
  picks the colour, the second the line style, the third the marker (e.g. a variant's position
  encoding, recurrence, loss). Series that differ in any property look different."""
  styles = [{"marker": "o"} for _ in keys]
  channels = ((_COLOURS, "color"), (_LINE_STYLES, "linestyle"), (_MARKERS, "marker"))
  for position, (choices, channel) in enumerate(channels[:len(keys[0])]):
    values = list(dict.fromkeys(key[position] for key in keys))  # in order of appearance
    for style, key in zip(styles, keys):
      style[channel] = choices[values.index(key[position]) % len(choices)]
  return styles


def steps_label(value: float) -> str:
  """500, 1k, 2.5k, 8k, 1.2M: short tick labels for counts."""
  for scale, suffix in ((1e6, "M"), (1e3, "k")):
    if abs(value) >= scale:
      return f"{value / scale:g}{suffix}"
  return f"{value:g}"


def label_log_axis(axis, values: Sequence[float]) -> None:
  """A log x axis with a tick and a short label at each of `values` only (matplotlib's own
  minor labels, 2x10^3 3x10^3, run into each other)."""
  from matplotlib import ticker
  axis.set_xscale("log")
  axis.xaxis.set_major_locator(ticker.FixedLocator(sorted(values)))
  axis.xaxis.set_major_formatter(ticker.FixedFormatter([steps_label(v) for v in sorted(values)]))
  axis.xaxis.set_minor_locator(ticker.NullLocator())


def save(opened, axes, path: str, xlabel, ylabel, legend_size=None,
         legend_outside: bool = False) -> str:
  """Labels (None: each axis keeps its own), grids and legends every axis, writes `path`
  (PNG, 100 dpi) and closes. `legend_outside`: the legend right of the plot, off the data (for
  many series)."""
  from matplotlib import pyplot
  for axis in axes:
    if xlabel is not None:
      axis.set_xlabel(xlabel)
    if ylabel is not None:
      axis.set_ylabel(ylabel)
    axis.grid(alpha=0.3)
    if legend_outside:
      axis.legend(fontsize=legend_size, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  borderaxespad=0.0)
    else:
      axis.legend(fontsize=legend_size)
  opened.tight_layout()
  # "tight": the saved image grows to hold a legend outside the axes.
  opened.savefig(path, dpi=100, bbox_inches="tight" if legend_outside else None)
  pyplot.close(opened)
  return path
