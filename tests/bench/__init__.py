"""Tests of the helpers and set-ups of bench/."""
