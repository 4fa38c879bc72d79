"""The package's import structure: layers import only downward, no cycles, no private names across packages.

Every `import` in lsm_lab/ is read with `ast` — at module level, under
`if TYPE_CHECKING:` and inside functions alike — and turned into an edge
module → module (`from lsm_lab.x import y` points at `lsm_lab.x.y` when that is
a module, else at `lsm_lab.x`).  The layer order is read from the `layers` block
of docs/ARCHITECTURE.md, the one place it is written down: one line per layer,
top to bottom, each naming its packages (`x/`) and foundation modules (`x.py`).
A module may import only its own layer and the layers below it; a module that no
line places fails the test (so a new package must be given its layer there).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "lsm_lab"

ARCHITECTURE = ROOT.parent / "docs" / "ARCHITECTURE.md"


def _read_layers() -> list[tuple[str, list[str]]]:
    """The `layers` block of docs/ARCHITECTURE.md, bottom to top: (layer, [package or module names])."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    block = text.split("```layers\n", 1)[1].split("```", 1)[0]
    layers = []
    for line in block.splitlines():
        if not line.strip():
            continue
        name, *rest = line.split()
        members = []
        for token in rest:
            if token.endswith("/"):
                members.append("lsm_lab." + token.rstrip("/").replace("/", "."))
            elif token.endswith(".py"):
                members.append("lsm_lab" if token == "__init__.py" else "lsm_lab." + token[:-3])
            else:
                break  # the description starts
        assert members, f"docs/ARCHITECTURE.md: layer {name!r} names no package or module"
        layers.append((name, members))
    return layers[::-1]


LAYERS = _read_layers()


@dataclass(frozen=True)
class Edge:
    src: str
    dst: str
    line: int
    in_function: bool
    names: tuple[str, ...]  # the names a `from ... import` takes (empty for `import x`)

    def where(self) -> str:
        return f"{self.src} (line {self.line}) -> {self.dst}"


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()
TREES = {name: ast.parse(path.read_text(encoding="utf-8"), str(path)) for name, path in MODULES.items()}


def is_package(module: str) -> bool:
    return module in MODULES and MODULES[module].name == "__init__.py"


def package_of(module: str) -> str:
    return module if is_package(module) else module.rpartition(".")[0]


def _function_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            inside.update(id(n) for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return inside


def _edges_of(module: str) -> list[Edge]:
    tree = TREES[module]
    in_fn = _function_nodes(tree)
    edges = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("lsm_lab"):
                    edges.append(Edge(module, alias.name, node.lineno, id(node) in in_fn, ()))
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = package_of(module).split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("lsm_lab"):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                dst = sub if sub in MODULES else target
                edges.append(Edge(module, dst, node.lineno, id(node) in in_fn, (alias.name,)))
    return edges


EDGES = [e for m in sorted(MODULES) for e in _edges_of(m)]


def layer_of(module: str) -> int:
    for index, (_, names) in enumerate(LAYERS):
        for name in names:
            if module == name or (name != "lsm_lab" and module.startswith(name + ".")):
                return index
    raise AssertionError(f"{module} has no layer: add its package to the `layers` block of docs/ARCHITECTURE.md")


def strongly_connected(nodes: list[str], succ: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; returns the components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(succ[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(succ[w]))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


# --------------------------------------------------------------------------- the rules
def test_the_parser_sees_the_package() -> None:
    # guards the guards: an empty module list or edge list would make every rule below pass
    assert len(MODULES) > 80 and "lsm_lab.api" in MODULES and "lsm_lab.table.state" in MODULES
    assert len(EDGES) > 300
    assert ("lsm_lab.api", "lsm_lab.table.state") in {(e.src, e.dst) for e in EDGES}
    assert any(e.in_function for e in EDGES)


def test_every_module_has_a_layer() -> None:
    for module in MODULES:
        layer_of(module)


def test_no_import_cycles() -> None:
    succ: dict[str, set[str]] = defaultdict(set)
    for e in EDGES:
        if e.src != e.dst:
            succ[e.src].add(e.dst)
    cycles = strongly_connected(sorted(MODULES), succ)
    assert cycles == [], "import cycles (module and function-level imports both count):\n" + "\n".join(
        " <-> ".join(c) for c in cycles)


def test_imports_go_only_downward() -> None:
    names = [name for name, _ in LAYERS]
    upward = [f"{e.where()}: {names[layer_of(e.src)]} imports {names[layer_of(e.dst)]}"
              for e in EDGES if layer_of(e.dst) > layer_of(e.src)]
    assert upward == [], "imports against the layer order:\n" + "\n".join(upward)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("_")  # _x, not __init__ or _repr_html_-style protocols


def test_no_private_names_across_packages() -> None:
    """`from lsm_lab.x import _name` only inside package x; a private module only from within its package."""
    bad = []
    for e in EDGES:
        home = package_of(e.dst)
        inside = package_of(e.src) == home or e.src.startswith(home + ".")
        if any(_private(part) for part in e.dst.split(".")) and not inside:
            bad.append(f"{e.where()}: private module {e.dst}")
        if package_of(e.src) != home:
            bad += [f"{e.where()}: private name {n}" for n in e.names if _private(n)]
    assert bad == [], "imports of another package's private names:\n" + "\n".join(bad)


def _private_methods() -> dict[str, set[str]]:
    """Private method/attribute names defined in classes, by the package defining them."""
    out: dict[str, set[str]] = defaultdict(set)
    for module, tree in TREES.items():
        for cls in ast.walk(tree):
            if isinstance(cls, ast.ClassDef):
                for item in cls.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(item.name):
                        out[package_of(module)].add(item.name)
    return out


def test_no_private_attributes_across_packages() -> None:
    """`module._name` on an imported lsm_lab module, or `obj._method` of a class of another package."""
    methods = _private_methods()
    bad = []
    for module, tree in TREES.items():
        here = package_of(module)
        aliases: dict[str, str] = {}  # local name -> lsm_lab module it is bound to
        for e in _edges_of(module):
            if e.names and e.dst in MODULES and e.dst.endswith("." + e.names[0]):
                aliases[e.names[0]] = e.dst
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    if alias.asname:
                        full = (f"{node.module}.{alias.name}" if isinstance(node, ast.ImportFrom) and node.module
                                else alias.name)
                        if full in MODULES:
                            aliases[alias.asname] = full
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name)):
                continue
            owner = node.value.id
            if owner in aliases and package_of(aliases[owner]) != here:
                bad.append(f"{module} (line {node.lineno}): {owner}.{node.attr} of {aliases[owner]}")
            elif owner not in ("self", "cls") and owner not in aliases and node.attr not in methods[here]:
                others = [p for p, names in methods.items() if node.attr in names and p != here]
                if others:
                    bad.append(f"{module} (line {node.lineno}): {owner}.{node.attr} (defined in {others[0]})")
    assert bad == [], "uses of another package's private attributes:\n" + "\n".join(bad)


def test_function_level_imports_say_why() -> None:
    """An lsm_lab import inside a function needs a reason (start-up time, an optional dependency) on its line."""
    bad = []
    for e in EDGES:
        if e.in_function:
            line = MODULES[e.src].read_text(encoding="utf-8").splitlines()[e.line - 1]
            if "#" not in line:
                bad.append(f"{e.where()}: {line.strip()}")
    assert bad == [], "function-level imports without a reason comment:\n" + "\n".join(sorted(set(bad)))


@pytest.mark.parametrize("package", sorted(m for m in MODULES if is_package(m)))
def test_package_names_do_not_shadow_submodules(package: str) -> None:
    """`import lsm_lab.spark.write as m` must give the module, so no package binds a submodule's name."""
    submodules = {m.rpartition(".")[2] for m in MODULES if m.rpartition(".")[0] == package}
    bound: dict[str, str] = {}
    for node in TREES[package].body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                name = alias.asname or alias.name
                target = f"{node.module}.{alias.name}"
                if target != f"{package}.{name}":
                    bound[name] = f"from {node.module} import {alias.name}"
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound[node.name] = "def"
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    bound[t.id] = "assignment"
    clash = {n: how for n, how in bound.items() if n in submodules}
    assert clash == {}, f"{package} binds names of its submodules: {clash}"


def test_every_listed_member_exists() -> None:
    """The list in docs/ARCHITECTURE.md names only packages and modules that are there (and each once)."""
    listed = [m for _, members in LAYERS for m in members]
    assert len(listed) == len(set(listed))
    assert [m for m in listed if m not in MODULES] == []


def test_every_package_is_one_layer() -> None:
    """Folders are layers: a subpackage is never listed apart from its package, and every top-level package
    is listed as a whole (a new folder must be given its own line)."""
    listed = {m for _, members in LAYERS for m in members}
    top_packages = {m for m in MODULES if is_package(m) and m.count(".") == 1}
    assert top_packages <= listed, f"packages without a layer: {sorted(top_packages - listed)}"
    assert all(m.count(".") <= 1 for m in listed)


# The table root has one name below the API: Hudi's basePath, spelled `base_path` (docs/ARCHITECTURE.md, "Names").
# The API takes `path` (create_table, open_table) and keeps it as `Table.path`; storage/ names generic folders,
# and bench/ works on folders of several tables, so both are outside the rule.
OTHER_ROOT_NAMES = {"base", "root", "basepath", "table_path", "table_root", "table_dir", "table_base", "tbl_path"}
ROOT_NAME_EXEMPT = ("lsm_lab.storage", "lsm_lab.bench")


def test_the_table_root_has_one_name() -> None:
    found = []
    for module, tree in TREES.items():
        if module.startswith(ROOT_NAME_EXEMPT):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
                found += [f"{module}.{node.name}({a.arg})" for a in args if a.arg in OTHER_ROOT_NAMES
                          and "Path" in ast.unparse(a.annotation or ast.Constant("Path"))]  # (a base file's rows: fine)
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                    and getattr(node.value.func, "id", None) == "as_path":
                found += [f"{module}: {t.id} = as_path(...)" for t in node.targets
                          if isinstance(t, ast.Name) and t.id in OTHER_ROOT_NAMES]
    assert not found, f"call the table root base_path: {found}"
