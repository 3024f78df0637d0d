"""One entry of the disk cache: a module's source and numba's files, with their hashes.

An entry is a folder ``<name>/`` holding ``<name>.py``, numba's ``__pycache__/*.nbi``
(index) and ``*.nbc`` (machine code) -- or, for a kernel compiled by LLVM directly
(native.py), ``<name>.ll`` and ``<name>.o`` -- and ``MANIFEST``: the SHA-256 of each of
those, written last.  ``check`` compares every file with it before numba reads any, so a
truncated file, random bytes or one flipped bit is caught before it is loaded.
``execute`` runs a module's source from memory (no ``.pyc``: no bytecode to damage),
with numba's cache beside the file it names.

This file imports only the standard library: the compiling process (``WORKER``) runs
it by path, without importing tracked, and ``worker`` compiles there.
"""
import contextlib
import hashlib
import json
import os
import sys
import tempfile
import time
import types

__all__ = ['MANIFEST', 'WORKER', 'source_file', 'read', 'write', 'write_manifest', 'check',
           'execute', 'missed', 'worker']

MANIFEST = 'MANIFEST'

# The compiling process: runs this file by path (not ``import tracked``: it starts in a
# fraction of a second), compiling the modules staged in the folder it is given.
WORKER = ('import importlib.util as u, sys\n'
          "spec = u.spec_from_file_location('_tracked_cache_worker', sys.argv[1])\n"
          'm = u.module_from_spec(spec)\n'
          'spec.loader.exec_module(m)\n'
          'm.worker(sys.argv[2:])\n')


def source_file(name):
    """The file of an entry holding its source: ``<name>.py`` for numba's modules,
    ``<name>.ll`` (LLVM IR) for a native kernel ``n_<hash>`` (native.py), whose
    machine code is ``<name>.o`` beside it."""
    return name + ('.ll' if name.startswith('n_') else '.py')


def _digest(data):
    return hashlib.sha256(data).hexdigest()


def read(path):
    with open(path, 'rb') as fh:
        return fh.read()


def _write_bytes(path, data):
    with open(path, 'wb') as fh:   # (a function of its own: the fault tests replace it)
        fh.write(data)


def write(path, data):
    """Write ``path`` whole or not at all: a temporary file renamed, removed on failure."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix='.', suffix='.tmp')
    os.close(fd)
    try:
        _write_bytes(tmp, data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _files(folder):
    """The files of an entry, as paths relative to it (MANIFEST and temporaries aside)."""
    out = []
    for dirpath, _, names in os.walk(folder):
        for n in names:
            rel = os.path.relpath(os.path.join(dirpath, n), folder)
            if rel != MANIFEST and '.tmp' not in n and not n.endswith('.pyc'):
                out.append(rel)
    return sorted(out)


def write_manifest(folder):
    """Write the MANIFEST of the entry in ``folder``: the hash of each of its files."""
    files = {rel: _digest(read(os.path.join(folder, rel))) for rel in _files(folder)}
    write(os.path.join(folder, MANIFEST), json.dumps({'files': files}, indent=1).encode())


def check(folder, name, source=None):
    """Why the entry in ``folder`` cannot be used (a file and what is wrong with it), or
    None if every file matches its MANIFEST (and the source is ``source``)."""
    path = os.path.join(folder, MANIFEST)
    try:
        files = json.loads(read(path))['files']
        if not isinstance(files, dict):
            raise TypeError
    except FileNotFoundError:
        return f'{path} is missing'
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return f'{path} is not a manifest'
    py = source_file(name)
    if py not in files or (source is not None and files[py] != _digest(source.encode())):
        return f'{os.path.join(folder, py)} is not the source of {name}'
    for rel, digest in files.items():
        path = os.path.join(folder, rel)
        try:
            data = read(path)
        except OSError as e:
            return f'{path}: {e.strerror or e}'
        if _digest(data) != digest:
            return f'{path} differs from what was written (SHA-256)'
    return None


def execute(name, source, path):
    """Run ``source`` as module ``name`` whose file is ``path``: numba finds its cache
    beside ``path`` (and needs the module in ``sys.modules`` to rebuild it)."""
    m = types.ModuleType(name)
    m.__file__ = path
    sys.modules[name] = m
    try:
        exec(compile(source, path, 'exec'), m.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return m


def missed(m):
    """Whether numba compiled a function of module ``m`` instead of loading it."""
    for v in vars(m).values():
        hits = getattr(v, '_cache_hits', None)
        if hits is None:
            continue
        if isinstance(hits, int):                                   # a cfunc
            if not hits:
                return True
        elif getattr(v, 'overloads', None) and not sum(hits.values()):   # a dispatcher
            return True
    return False


def worker(argv):
    """The compiling process (``WORKER``): compile each module staged in folder
    ``argv[0]``, load it back from what numba wrote (the code's first load happens here,
    not in the user's process), and write its MANIFEST.  A native kernel's IR is built
    by native.py (run by path too: a process building only those never imports numba,
    and starts in ~0.1 s)."""
    job = argv[0]
    builder = None
    for name in sorted(os.listdir(job)):
        folder = os.path.join(job, name)
        path = os.path.join(folder, source_file(name))
        source = read(path).decode()
        start = time.process_time()
        if path.endswith('.ll'):
            if builder is None:
                builder = _by_path('_tracked_native_builder', 'native.py')
            write(os.path.join(folder, f'{name}.o'), builder.build(source))
        else:
            execute(name, source, path)
            del sys.modules[name]
            if missed(execute(name, source, path)):
                sys.exit(f'{name}: numba did not load the code it had just written to {folder}')
        write_manifest(folder)
        print(f'{name}: {time.process_time() - start:.2f} s', flush=True)


def _by_path(name, file):
    """Module ``file`` of this folder, run by path under ``name`` (not imported through
    tracked: the worker starts without it)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(
        os.path.abspath(__file__)), file))
    assert spec is not None and spec.loader is not None
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m
