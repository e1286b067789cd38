"""The project's PNG figures (matplotlib, headless): one way to open and to save them."""


def figure(columns: int = 1, width: float = 7.0, height: float = 4.5):
  """(figure, [axes]) on the Agg backend (no display needed)."""
  import matplotlib
  matplotlib.use("Agg")
  from matplotlib import pyplot
  opened, axes = pyplot.subplots(1, columns, figsize=(width * columns, height), squeeze=False)
  return opened, list(axes[0])


def save(opened, axes, path: str, xlabel, ylabel, legend_size=None) -> str:
  """Labels (None: each axis keeps its own), grids and legends every axis, writes `path`
  (PNG, 100 dpi) and closes."""
  from matplotlib import pyplot
  for axis in axes:
    if xlabel is not None:
      axis.set_xlabel(xlabel)
    if ylabel is not None:
      axis.set_ylabel(ylabel)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=legend_size)
  opened.tight_layout()
  opened.savefig(path, dpi=100)
  pyplot.close(opened)
  return path
