"""Plan: what a run will do, before anything runs.

The matrix and its validation (`matrix`), the fio job library (`fiojobs`),
app presets and what they need from the host (`apps`, `hosts`), storage and
instance limits (`limits`), expected ceilings (`expect`) and cost (`cost`),
with their data files under `data/`. Standard library plus pydantic: the
Lambdas and the instance agent import from here.
"""
