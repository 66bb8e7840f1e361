"""The variants benchmark's configuration: a dozen models spanning sizes, and its tables."""
from lab import generator as g
from lab import variants_benchmark as vb
from synthetic_rows import synthetic_rows


def test_dozen_models_span_small_to_large():
    specs = g.generate_specs()
    dozen = vb.dozen_models(specs)
    assert len(dozen) == 12 and len({s.config_id for s in dozen}) == 12
    sizes = [sum(s.a_elements()) for s in dozen]
    assert sizes == sorted(sizes) and sizes[0] < 200 and sizes[-1] > 5e5
    assert all(s.F <= vb.MAX_FM and s.M <= vb.MAX_FM for s in dozen)
    assert [s.config_id for s in vb.dozen_models(specs)] == [s.config_id for s in dozen]


def test_tables_from_rows():
    rows = synthetic_rows(vb.dozen_models(g.generate_specs())[:3])
    table = vb.speedup_table(rows)
    assert "| fpi | hybrid | 3 |" in table and "packed: worst" in table
    params = vb.parameter_table(rows)
    assert params.splitlines()[0].startswith("| family |")
