"""Report tables and ratios, shared by the strip and the shrink reports.

    >>> from tf1prune.export.table import count, ratio, table
    >>> print('\\n'.join(table(('layer', 'op', 'weights'),
    ...                        [('conv1', 'Conv2D', count(1728))],
    ...                        ('total', '', count(1728)))))
    layer  op      weights
    ----------------------
    conv1  Conv2D    1,728
    ----------------------
    total            1,728
    >>> ratio(1, 4), ratio(3, 0)
    (0.25, None)
"""


def ratio(numerator, denominator):
  """`numerator / denominator` as a float; None if the denominator is 0."""
  return numerator / float(denominator) if denominator else None


def count(value):
  """An int with thousands separators; 'n/a' for None."""
  return 'n/a' if value is None else '{:,}'.format(value)


def table(header, rows, total):
  """Lines of a text table: header, rule, rows, rule, total.

  The first two columns are aligned left (names), the others right (numbers).

  Args:
    header: tuple of column titles.
    rows: list of tuples of str, as long as `header`.
    total: the last row.

  Returns:
    A list of str, one per line.
  """
  widths = [max(len(row[i]) for row in list(rows) + [header, total])
            for i in range(len(header))]

  def line(row):
    return '  '.join([row[0].ljust(widths[0]), row[1].ljust(widths[1])] +
                     [c.rjust(w) for c, w in zip(row[2:], widths[2:])])

  rule = '-' * len(line(header))
  return [line(header), rule] + [line(row) for row in rows] + [rule,
                                                               line(total)]
