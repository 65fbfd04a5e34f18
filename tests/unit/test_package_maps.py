"""Every package's ``__init__`` names every module it holds (docs name modules that exist: test_docs.py)."""

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "vicurl"
PACKAGES = sorted(p.parent for p in SRC.rglob("__init__.py"))


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(SRC.parent)))
def test_the_package_map_names_every_module(package):
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    held = [p.stem for p in package.glob("*.py") if p.stem != "__init__"]
    held += [p.name for p in package.iterdir() if (p / "__init__.py").exists()]
    missing = [m for m in held if f"``{m}``" not in doc]
    assert not missing, f"{package.relative_to(SRC.parent)}/__init__.py does not name {missing}"
