"""Measuring: the timed window (`window`: warm-up outside, calls until a duration and a count are
met, power over exactly the timed calls), statistics and intervals (`stats`, `intervals`), noise
during the window (`noise`), numeric agreement (`numerics`), memory (`memory`) and power (`power/`).

Floor 2 of kit/ (docs/architecture.md): imports kit.hardware, kit.published and the leaves;
never models, backends or anything above.
"""
