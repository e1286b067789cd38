"""What every floor shares and nothing of XLNet: user-input errors, JSON files, outputs built
under a temporary name, progress lines, figures, relative errors and the CLIs' common runner."""

__all__ = []
