"""Progress of long exports: a callback, and one updating terminal line.

    >>> import io
    >>> from tf1prune.export.progress import TerminalProgress, notify
    >>> class Tty(io.StringIO):
    ...   def isatty(self):
    ...     return True
    >>> out = Tty()
    >>> bar = TerminalProgress(out, prog='strip', clock=iter([0, 0, 2]).__next__)
    >>> notify(bar, 'writing variables', 1, 4)
    >>> notify(bar, 'writing variables', 2, 4)
    >>> out.getvalue().split('\\r')[-1]
    'strip: writing variables 2/4, 2s elapsed, about 2s left'

The library functions that can take minutes (`strip_checkpoint`,
`shrink_pb`, `shrink_graph_def`, `prune_checkpoint`) take an optional
`progress` callable, called as `progress(stage, done, total, fraction)`:
`stage` a short text (`'writing variables'`, `'shrinking layers (round
1)'`, ...), `done` of `total` items of that stage done (0 when it starts),
`fraction` the share of the stage's work done, in [0, 1] (by bytes where the
items differ in size, as variables do: it is what the time left is
estimated from). The console
scripts pass `terminal_progress()`: one line on stderr, rewritten in place
(layers done of total, time elapsed, time left; narrower than the
terminal, which would wrap it), only when stderr is a terminal and `--quiet`
is not given. Piped output stays clean.
"""

import os
import sys
import time


def notify(progress, stage, done, total, fraction=None):
  """Calls `progress(stage, done, total, fraction)` unless it is None.

  `fraction` defaults to `done / total` (1 for an empty stage).
  """
  if progress is not None:
    if fraction is None:
      fraction = float(done) / total if total else 1.0
    progress(stage, done, total, fraction)


def _duration(seconds):
  seconds = int(round(seconds))
  if seconds < 60:
    return '%ds' % seconds
  if seconds < 3600:
    return '%dm%02ds' % divmod(seconds, 60)
  return '%dh%02dm' % (seconds // 3600, seconds % 3600 // 60)


class TerminalProgress(object):
  """A progress callback drawing one line on a terminal, rewritten in place.

  Args:
    stream: a text stream (default `sys.stderr`).
    prog: the program name the line starts with.
    min_interval: seconds between redraws (the first and last item of a
      stage are always drawn).
    clock: returns the time in seconds (`time.time`).
    columns: the terminal's width; None asks the stream's terminal at every
      redraw. A line as wide as the terminal or wider wraps, and `\\r` then
      rewrites only its last row: each redraw would add a row. So the line
      is kept narrower: without `prog`, then cut.
  """

  def __init__(self, stream=None, prog='', min_interval=0.2, clock=None,
               columns=None):
    self._stream = stream if stream is not None else sys.stderr
    self._prog = prog
    self._min_interval = min_interval
    self._clock = clock or time.time
    self._columns = columns
    self._start = self._clock()
    self._stage, self._stage_start, self._drawn = None, self._start, None
    self._width = 0

  def __call__(self, stage, done, total, fraction=None):
    now = self._clock()
    if fraction is None:
      fraction = float(done) / total if total else 1.0
    if stage != self._stage:
      self._stage, self._stage_start, self._drawn = stage, now, None
    if (self._drawn is not None and 0 < done < total and
        now - self._drawn < self._min_interval):
      return
    self._drawn = now
    text = '%s %d/%d, %s elapsed' % (stage, done, total,
                                     _duration(now - self._start))
    if 0 < done < total and fraction > 0:
      left = (now - self._stage_start) * (1.0 - fraction) / fraction
      text += ', about %s left' % _duration(left)
    if self._prog:
      text = '%s: %s' % (self._prog, text)
    columns = self._terminal_columns()
    text = self._fit(text, columns)
    pad = max(0, self._width - len(text))
    if columns:   # the padding must not wrap either (a narrowed terminal)
      pad = max(0, min(pad, columns - 1 - len(text)))
    self._width = len(text)
    self._stream.write('\r' + text + ' ' * pad)
    self._stream.flush()

  def _terminal_columns(self):
    """The terminal's width, or None if unknown."""
    if self._columns is not None:
      return self._columns
    try:
      return os.get_terminal_size(self._stream.fileno()).columns or None
    except (AttributeError, ValueError, OSError):
      return None

  def _fit(self, text, columns):
    """`text`, narrower than the terminal (no `prog: `, then cut)."""
    if not columns or columns <= 1 or len(text) < columns:
      return text
    if self._prog and text.startswith(self._prog + ': '):
      text = text[len(self._prog) + 2:]
    return text[:columns - 1]

  def close(self):
    """Clears the line (the program's own output follows)."""
    if self._width:
      self._stream.write('\r' + ' ' * self._width + '\r')
      self._stream.flush()
      self._width = 0


def terminal_progress(prog='', quiet=False, stream=None):
  """A `TerminalProgress` on `stream` (stderr) if it is a terminal, else None.

  Args:
    prog: the program name the line starts with.
    quiet: return None (no progress), as `--quiet`.
    stream: default `sys.stderr`.
  """
  stream = stream if stream is not None else sys.stderr
  isatty = getattr(stream, 'isatty', None)
  if quiet or isatty is None or not isatty():
    return None
  return TerminalProgress(stream, prog)
