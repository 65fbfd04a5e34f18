import pandas as pd
import pytest

from vicurl.report.aggregate import collect
from vicurl.report.figures import learning_curves


def data():
    recs = []
    for cur in ("none", "vicurl"):
        for seed in (0, 1):
            for step in (0, 5, 10):
                for b in ("arith", "arith_hard"):
                    v = 0.1 + 0.02 * step * (1.5 if cur == "vicurl" else 1) + 0.01 * seed
                    recs.append(dict(study="demo", model="tiny", reward="oracle", curriculum=cur,
                                     seed=seed, step=step, benchmark=b,
                                     **{"pass@1": v, "pass@8": min(1, 2 * v)}))
    return collect(recs)


@pytest.mark.parametrize("band", ["minmax", "std", None])
def test_png_written(tmp_path, band):
    out = tmp_path / "fig" / "curves.png"
    written = learning_curves(data(), out, metric="pass@1", hue_label="Curriculum", band=band,
                              labels={"none": "No Curriculum", "vicurl": "VI-CuRL"})
    assert written == [out]
    assert out.stat().st_size > 1000
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in out.parent.iterdir()] == ["curves.png"]  # no temp files left


def test_png_and_pdf(tmp_path):
    paths = [tmp_path / "c.png", tmp_path / "c.pdf"]
    learning_curves(data(), paths, metric="pass@8")
    assert paths[1].read_bytes()[:4] == b"%PDF" and paths[0].stat().st_size > 0


def test_ambiguous_rows_error(tmp_path):
    df = pd.concat([data(), data().assign(model="other")])
    with pytest.raises(ValueError, match="several rows"):
        learning_curves(df, tmp_path / "x.png")
