"""The floors of kit/ (docs/architecture.md): the import-linter contract, no import cycles, and no
kit import hidden inside a function unless the imported module needs an optional heavy library."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

KIT = Path(__file__).resolve().parents[2] / "kit"
#: Libraries heavy enough (or optional enough) to import only when used.
HEAVY = {
    "torch",
    "tensorflow",
    "tf2onnx",
    "transformers",
    "openvino",
    "nncf",
    "poprt",
    "dask",
    "distributed",
    "keras",
    "onnxruntime",
    "papermill",
    "nbconvert",
    "matplotlib",
    "IPython",
    "mlperf_loadgen",
    "pynvml",
    "skimage",
    "jieba",
    "tokenizers",
    "safetensors",
    "onnxscript",
    "onnxconverter_common",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(KIT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, ast.Module]:
    return {module_name(p): ast.parse(p.read_text()) for p in sorted(KIT.rglob("*.py"))}


def imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level:
        base = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
        return [".".join(base + ([node.module] if node.module else []))]
    return [node.module or ""]


def top_level_imports(tree: ast.Module) -> set[str]:
    """Top-level packages a module imports at import time (outside functions)."""
    found: set[str] = set()
    for node in tree.body:
        for sub in ast.walk(node):
            if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
                break
            if isinstance(sub, ast.Import):
                found |= {a.name.split(".")[0] for a in sub.names}
            elif isinstance(sub, ast.ImportFrom) and not sub.level and sub.module:
                found.add(sub.module.split(".")[0])
    return found


def nested_kit_imports() -> list[tuple[str, str, int]]:
    """(module, imported kit module, line) for every kit import inside a function."""
    trees = modules()
    out = []
    for mod, tree in trees.items():
        is_pkg = (KIT.parent / Path(*mod.split("."))).is_dir()
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    for target in imported(node, mod, is_pkg):
                        if target.split(".")[0] == "kit":
                            out.append((mod, target, node.lineno))
    return out


def heavy_module(target: str, trees: dict[str, ast.Module]) -> bool:
    """True when `target` (or the module an imported name lives in) imports a heavy library at
    import time: importing it lazily keeps that library out of processes that never use it."""
    candidates = [target, target.rsplit(".", 1)[0]]
    return any(top_level_imports(trees[c]) & HEAVY for c in candidates if c in trees)


def test_kit_imports_inside_functions_are_only_for_heavy_libraries():
    trees = modules()
    hidden = sorted(
        {
            f"{m}:{line} imports {t}"
            for m, t, line in nested_kit_imports()
            if not heavy_module(t, trees)
        }
    )
    assert not hidden, (
        "kit imports inside functions (move them to the top of the module):\n" + "\n".join(hidden)
    )


@pytest.mark.parametrize("package", ["kit", "benchmarks"])
def test_no_import_cycles_between_modules(package):
    """kit/'s floors, and benchmarks/ (peer_arms <-> peer_gpu_arms was one, through a function's
    import)."""
    graph = grimp.build_graph(package)
    cycles = []
    for module in sorted(graph.modules):
        for imported_module in graph.find_modules_directly_imported_by(module):
            if graph.chain_exists(importer=imported_module, imported=module):
                cycles.append(f"{module} -> {imported_module} -> ... -> {module}")
    # a package's __init__ importing its own modules is not a cycle of concern when they do not
    # import it
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


@pytest.mark.skipif(
    shutil.which("lint-imports", path=str(Path(sys.executable).parent)) is None,
    reason="import-linter is not installed in this environment",
)
def test_floors_contract_is_kept():
    lint = str(Path(sys.executable).parent / "lint-imports")
    done = subprocess.run([lint, "--no-cache"], capture_output=True, text=True, cwd=KIT.parent)
    assert done.returncode == 0, done.stdout[-3000:]


def test_every_cli_verb_lives_in_kit_cli():
    """The `kit` command's verbs are the top floor's (kit/cli/), never a lower floor's module."""
    from kit.cli.main import COMMAND_MODULES

    assert all(name.startswith("kit.cli.") for name in COMMAND_MODULES), COMMAND_MODULES
    elsewhere = sorted(
        str(p.relative_to(KIT.parent))
        for p in KIT.rglob("*.py")
        if p.parent.name != "cli" and "add_parser(" in p.read_text()
    )
    assert not elsewhere, f"kit commands outside kit/cli/: {elsewhere}"


#: A record of more than FEW_FIELDS fields takes at most KEPT_POSITIONAL (its identity) by position.
FEW_FIELDS, KEPT_POSITIONAL = 5, 3


def positional_fields(cls: ast.ClassDef) -> tuple[int, int] | None:
    """(fields, fields that may be given by position) of a dataclass, or None for another class."""
    decorator = next((d for d in cls.decorator_list if "dataclass" in ast.unparse(d)), None)
    if decorator is None:
        return None
    names = [
        ast.unparse(b.target)
        for b in cls.body
        if isinstance(b, ast.AnnAssign) and "ClassVar" not in ast.unparse(b.annotation)
    ]
    fields = [n for n in names if n != "_"]  # `_: KW_ONLY` marks where keyword-only fields start
    if "kw_only=True" in ast.unparse(decorator):
        return len(fields), 0
    return len(fields), names.index("_") if "_" in names else len(fields)


def test_records_with_more_than_a_few_fields_are_built_by_keyword():
    """issue 53: `Comparison(study, figure, ...)` with 16 positional arguments read as a puzzle."""
    loose = []
    for mod, tree in modules().items():
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            counts = positional_fields(cls)
            if counts and counts[0] > FEW_FIELDS and counts[1] > KEPT_POSITIONAL:
                loose.append(f"{mod}.{cls.name}: {counts[1]} of {counts[0]} fields by position")
    fix = "make these @dataclass(kw_only=True), or `_: KW_ONLY` after the first few fields:"
    assert not loose, "\n".join([fix, *loose])


TEST_FOLDERS = {
    "leaves",
    "hardware",
    "measure",
    "models",
    "datasets",
    "backends",
    "search",
    "studies",
    "batch",
    "publish",
    "cli",
    "project",
}


def test_every_test_file_lives_in_its_floor_s_folder():
    """Issue 53: tests/ was one flat folder of 116 files; each now sits in the folder of the floor
    it tests (docs/architecture.md), and a new one cannot land at the top."""
    tests = Path(__file__).resolve().parents[1]
    assert not sorted(p.name for p in tests.glob("test_*.py"))
    folders = {p.parent.name for p in tests.glob("*/test_*.py")}
    assert folders <= TEST_FOLDERS, folders - TEST_FOLDERS


#: What publishing reads and renders: the result JSON, the batch's state, the published data.
RENDERING = (
    "kit.publish.site",
    "kit.publish.scorecard",
    "kit.publish.report",
    "kit.publish.index_content",
    "kit.publish.card_table",
    "kit.publish.bytemlperf_export",
    "kit.publish.compare_runs",
)
#: Floors rendering never needs: reports are rebuilt from JSON on any laptop (style.md).
MEASURING = ("kit.studies", "kit.search", "kit.backends", "kit.models", "kit.datasets")


def test_rendering_imports_no_backend_or_study():
    """`make site` and every report read JSON only: importing them loads no backend, study, search,
    model or dataset module (kit.batch's records and state once pulled in the whole runner)."""
    code = (
        "import importlib, sys\n"
        f"for name in {RENDERING!r}: importlib.import_module(name)\n"
        f"print(sorted(m for m in sys.modules if m.startswith({MEASURING!r})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=KIT.parent, check=True
    )
    assert done.stdout.strip() == "[]", done.stdout
