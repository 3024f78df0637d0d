"""Module layering: the tree protocol and the calling convention are reached through public
names only, and the package's import graph has no circle."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent / 'tracked'
MODULES = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob('*.py'))


def _imports(path):
    """(module, name) for each ``from .module import name`` of a file, relative imports only."""
    tree = ast.parse((ROOT / path).read_text())
    return [(node.module or '', alias.name) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level
            for alias in node.names]


@pytest.mark.parametrize('path', MODULES)
def test_no_underscored_names_from_other_modules(path):
    private = [f'{m}.{n}' for m, n in _imports(path) if n.startswith('_')]
    assert private == []


def test_api_does_not_import_backends():
    assert not [m for m, _ in _imports('api.py') if m == 'backends']
    assert not [m for m, _ in _imports('arguments.py') if m in ('api', 'backends')]
    assert not [m for m, _ in _imports('tree_util.py') if m not in ('box',)]


# --------------------------------------------------------------------------
# The import graph of the package has no circle
# --------------------------------------------------------------------------

# Imports inside functions that close a circle, each with its reason.  Nothing else may:
# a module that needs one that needs it back is one module in two files, or a sign
# that a shared piece belongs in a lower module (as reverse.py's vjp, below api.py).
LAZY_CIRCLES: dict[tuple[str, str], str] = {}


def _module_name(path):
    parts = list(path.relative_to(ROOT.parent).with_suffix('').parts)
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def import_graph():
    """``{module: {(imported module, at module level?)}}`` over tracked's own modules.
    ``from .x import y`` counts as an import of ``x.y`` when that is a module, else of
    ``x``; a package's ``__init__`` is the package."""
    paths = {_module_name(p): p for p in ROOT.rglob('*.py')}
    graph = {m: set() for m in paths}
    for m, path in paths.items():
        tree = ast.parse(path.read_text())
        top = {id(n) for stmt in tree.body
               if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
               for n in ast.walk(stmt)}
        package = m.split('.') if path.name == '__init__.py' else m.split('.')[:-1]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[:len(package) - node.level + 1]
                    target = '.'.join(base + ([node.module] if node.module else []))
                elif (node.module or '').split('.')[0] == 'tracked':
                    target = node.module
                else:
                    continue
                names = [f'{target}.{a.name}' for a in node.names]
            elif isinstance(node, ast.Import):
                target, names = None, [a.name for a in node.names]
            else:
                continue
            for name in names:
                found = name if name in paths else target if target in paths else None
                if found and found != m:
                    graph[m].add((found, id(node) in top))
    return graph


def _circles(edges):
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))
    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def test_the_graph_sees_relative_and_lazy_imports():
    g = import_graph()
    assert ('tracked.reverse', True) in g['tracked.api']
    assert ('tracked.compiled_tape.tapes', True) in g['tracked.compiled_tape']
    assert ('tracked.show', False) in g['tracked.duplicated']
    assert _circles({'a': {'b'}, 'b': {'c'}, 'c': {'a'}, 'd': {'a'}}) == [['a', 'b', 'c']]


def test_no_circle_among_module_level_imports():
    g = import_graph()
    assert _circles({m: {t for t, top in e if top} for m, e in g.items()}) == []


def test_no_circle_through_imports_inside_functions_but_the_listed_ones():
    g = import_graph()
    assert _circles({m: {t for t, top in e if (m, t) not in LAZY_CIRCLES}
                     for m, e in g.items()}) == []
    for (m, t), why in LAZY_CIRCLES.items():
        assert (t, False) in g[m], f'{m} no longer imports {t} ({why}): drop it from the list'


# --------------------------------------------------------------------------
# Modules meet through named functions: no private attribute of another module's
# objects is read, no module patches another at import
# --------------------------------------------------------------------------

# The box protocol's slots and private methods (box.py) are used only by the modules that
# define box types or make boxes; every other module calls box.py's functions (node,
# unboxed, level, state, ...).
BOX_SLOTS = {'_node', '_value', '_alias', '_chain', '_tangent', '_forward', '_concrete',
             '_as_int', '_as_ratio'}
BOX_MODULES = {'tracked.box', 'tracked.boxes', 'tracked.dispatch', 'tracked.integers',
               'tracked.values', 'tracked.forward', 'tracked.views'}
# Private attributes of other libraries' objects, each with its reason.
FOREIGN = {'_address': "a Dask Actor's worker, which Dask 2026.8 names nowhere else: a "
                       "replica is called there directly (distributed/replicas.py)"}


def _external_aliases(tree):
    """Names a file binds to modules outside tracked (``np``, ``sys``, ``sp``, ...)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update((a.asname or a.name).split('.')[0] for a in node.names
                         if not a.name.startswith('tracked'))
        elif isinstance(node, ast.ImportFrom) and not node.level \
                and not (node.module or '').startswith('tracked'):
            names.update(a.asname or a.name for a in node.names)
    return names


def _own_names(tree):
    """The names a file defines: functions, classes, assigned names and attributes,
    slot strings."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)
    return names


def private_reads(path):
    """``file:line: expression`` for each read of another module's private attribute."""
    tree = ast.parse(path.read_text())
    module = _module_name(path)
    own, external = _own_names(tree), _external_aliases(tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith('_')
                and not node.attr.startswith('__')):
            continue
        base = node.value
        if isinstance(base, ast.Name) and base.id in {'self', 'cls'} | external:
            continue
        if node.attr in BOX_SLOTS:
            if module in BOX_MODULES:
                continue
        elif node.attr in own or node.attr in FOREIGN:
            continue
        found.append(f'{path.relative_to(ROOT.parent)}:{node.lineno}: {ast.unparse(node)}')
    return found


def test_no_private_attributes_of_other_modules():
    found = [line for p in sorted(ROOT.rglob('*.py')) for line in private_reads(p)]
    assert found == []


def test_the_private_attribute_check_sees_a_read():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        p = pathlib.Path(d) / 'tracked' / 'x.py'
        p.parent.mkdir()
        p.write_text('import numpy as np\n\ndef f(t, tape):\n    np._NoValue\n'
                     '    return t._node, tape._outs, t._mine\n\nclass A:\n    _mine = 1\n')
        global ROOT
        old, ROOT = ROOT, p.parent
        try:
            assert [line.split(': ')[1] for line in private_reads(p)] == ['t._node', 'tape._outs']
        finally:
            ROOT = old


def test_no_module_assigns_over_another_at_import():
    patched = []
    for path in sorted(ROOT.rglob('*.py')):
        tree = ast.parse(path.read_text())
        modules = {a.asname or a.name for node in tree.body if isinstance(node, ast.ImportFrom)
                   and node.level for a in node.names} | {
                   (a.asname or a.name) for node in tree.body if isinstance(node, ast.Import)
                   for a in node.names}
        for stmt in tree.body:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else \
                [stmt.target] if isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) else []
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) \
                        and t.value.id in modules:
                    patched.append(f'{path.relative_to(ROOT.parent)}:{stmt.lineno}')
    assert patched == []


# --------------------------------------------------------------------------
# The convenience API sits below the compiler; one module holds the calling convention
# --------------------------------------------------------------------------

def _reached(graph, module):
    """The modules ``module`` imports at module level, directly or through others."""
    seen, todo = set(), [module]
    while todo:
        for t, top in graph[todo.pop()]:
            if top and t not in seen:
                seen.add(t)
                todo.append(t)
    return seen


BACKENDS = ('tracked.compiled_tape', 'tracked.backends', 'tracked.duplicated')


@pytest.mark.parametrize('module', ['tracked.api', 'tracked.arguments', 'tracked.reverse',
                                    'tracked.jacobians'])
def test_the_api_sits_below_the_compiler(module):
    """``tr.gradient(f, adtype, ...)`` asks the adtype object: the API imports no backend,
    neither at module level through any chain nor inside a function."""
    g = import_graph()
    below = _reached(g, module)
    assert not [m for m in below if m.startswith(BACKENDS)], sorted(below)
    assert not [t for t, _ in g[module] if t.startswith(BACKENDS)]
    # ... and the compiler is above it
    assert 'tracked.arguments' in _reached(g, 'tracked.compiled_tape')


# What decides the calling convention: defined in arguments.py, nowhere else.
CONVENTION = ('differentiable', 'tape_input', 'trainable', 'first_output', 'check_scalar',
              'loss_output', 'check_output', 'is_annotated', 'split_backend', 'leaf_value')


def _defined(path):
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.ClassDef))}


def test_one_module_decides_leaves_and_loss():
    for path in ROOT.rglob('*.py'):
        if path.name == 'arguments.py' and path.parent == ROOT:
            assert set(CONVENTION) <= _defined(path)
            continue
        assert not _defined(path) & set(CONVENTION), path
    # a tape's leaves are the convention's (no second list of "intended differences")
    trees = (ROOT / 'compiled_tape' / 'trees.py').read_text()
    assert 'intended differences' not in trees.lower()
    assert ('arguments', 'tape_input') in _imports('compiled_tape/trees.py')
    # the loss is picked and checked by one call, loss_output, on every path
    users = [p for p in ROOT.rglob('*.py') if p.name != 'arguments.py'
             and any(n == 'check_scalar' for _, n in _imports(p.relative_to(ROOT)))]
    assert users == []
    for path in ('reverse.py', 'duplicated.py', 'distributed/gradients.py', 'backends.py',
                 'compiled_tape/tapes.py'):
        assert any(n == 'loss_output' for _, n in _imports(path)), path
